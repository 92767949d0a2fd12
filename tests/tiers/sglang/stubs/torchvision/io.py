"""Stand-in ``torchvision.io`` (sglang 0.5.20: ``from torchvision.io import decode_jpeg``)."""

from torchvision._stub import module_getattr

__getattr__ = module_getattr("torchvision.io")
