"""``vlbias report``: static HTML + Markdown reports with PNG figures, read from results files and logs."""

from vlbias.report.build import Report, build_report
from vlbias.report.pareto import pareto_front

__all__ = ["Report", "build_report", "pareto_front"]
