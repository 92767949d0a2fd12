from torchvision._stub import module_getattr
from torchvision.transforms import functional, v2  # noqa: F401

__getattr__ = module_getattr("torchvision.transforms")
