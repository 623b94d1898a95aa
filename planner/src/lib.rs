//! kvplan planner: plan and profile schemas and budget allocators. Never depends on burn.
