"""The published comparison, reproduced: conditions x evaluation seeds, in parallel."""
