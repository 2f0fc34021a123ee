"""nanorlhf: InstructGPT at toy scale, in plain PyTorch."""
