"""torchvision imported through :func:`vlbias.runtime.torch_pair.import_torchvision` before ``torchmetrics`` imports it:
a torchvision built for another torch is then one line, not its operator registration's traceback."""

from vlbias.runtime.torch_pair import import_torchvision

import_torchvision()
