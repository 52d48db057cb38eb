"""torchvision imported through :func:`vlbias.torch_pair.import_torchvision` before ``torchmetrics`` imports it:
a torchvision built for another torch is then one line, not its operator registration's traceback."""

from vlbias.torch_pair import import_torchvision

import_torchvision()
