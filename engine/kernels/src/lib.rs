//! CUDA kernel sources compiled to an embedded fatbin (feature cuda).
