"""One module per figure family; each function takes the run's Bench and records its figures."""
