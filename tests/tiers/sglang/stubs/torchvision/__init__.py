"""Stand-in torchvision (see ``_stub``)."""

from torchvision import io, transforms  # noqa: F401
from torchvision._stub import module_getattr

__version__ = "0.0.0+stub"
__getattr__ = module_getattr("torchvision")
