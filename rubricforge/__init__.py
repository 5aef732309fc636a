"""rubricforge: training data, rewards and training runs for RL of deep-research agents."""

__version__ = "0.1.0"
