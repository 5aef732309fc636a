"""``python -m rubricforge``: the command line."""

from rubricforge.cli import main

main()
