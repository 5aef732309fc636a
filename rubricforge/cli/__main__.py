"""``python -m rubricforge.cli``."""

from rubricforge.cli import main

main()
