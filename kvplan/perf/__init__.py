"""Step time and serving latency: FLOPs and bytes of each part of a forward step from the model's shapes,
turned into time by the GPU's datasheet peaks and fitted efficiency coefficients, driven by the engine's admission
(floor 3, beside plan/: pure, no torch)."""
