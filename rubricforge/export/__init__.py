"""Export of a run: the Hugging Face dataset with its DR Tulu and TRL views, the dataset card with
the run's statistics, an optional Hub push, and the static HTML viewer."""

from rubricforge.export.dataset import export_dataset
from rubricforge.export.viewer import write_viewer

__all__ = ["export_dataset", "write_viewer"]
