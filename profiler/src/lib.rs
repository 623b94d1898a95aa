//! kvplan profiler: measures a model's heads and layers and writes a `Profile` (filled by the profiler issue).
