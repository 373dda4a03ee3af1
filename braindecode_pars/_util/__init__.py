"""Private helpers shared by every layer: argument checks, parameter records, logging,
braindecode's signal attributes, the one atomic write, torch's thread counts, and the
old paths of modules that moved. Not part of the public interface."""
