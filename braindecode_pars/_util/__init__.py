"""Private helpers shared by every layer: argument checks, parameter records, logging,
braindecode's signal attributes, the one atomic write, torch's thread counts, frequency
bands and their filters. Internal: on no API page, so they may change without notice."""
