// Anchor so the calibrate library is never empty.
