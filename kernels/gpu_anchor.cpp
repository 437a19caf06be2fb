// Anchor so the GPU kernels library is never empty.
