// Anchor so the host-side kernels library is never empty.
