"""Ready-made studies behind `torchmark demo`."""
