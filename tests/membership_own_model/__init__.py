"""A team's own model for the membership tests: trained through train_own_model, references from its recipe."""
