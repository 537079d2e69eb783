"""As torch.utils: the helpers extensions build with."""
