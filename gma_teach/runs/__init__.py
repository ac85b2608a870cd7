"""The run wing: the code that runs, times and records the studies (never imported by the story's modules)."""
