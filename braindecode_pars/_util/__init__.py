"""Private helpers shared by every layer: argument checks, parameter records, logging,
and braindecode's signal attributes. Not part of the public interface."""
