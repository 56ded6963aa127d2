"""What the scenario scripts are built from: traffic, a scheduler, the cache protocol."""
