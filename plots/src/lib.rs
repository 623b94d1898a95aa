//! kvplan plots: figures of profiles, plans and results (filled by the plots issue).
