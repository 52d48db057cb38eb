"""How a run's process behaves, whatever it runs: its torch threads (:mod:`~vlbias.runtime.threads`) and other
libraries' log levels for the length of a block (:mod:`~vlbias.runtime.log_levels`), and the machine it ran on
as results record it (:mod:`~vlbias.runtime.environment`). Imports no torch."""
