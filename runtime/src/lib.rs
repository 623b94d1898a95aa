//! kvplan runtime: executes a Llama-family GGUF model in burn.
