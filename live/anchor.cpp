// Anchor so stepsim_live_host is never an empty archive.
