"""The pieces of ``ember.utils.benchmark``: ``common`` (TaskSpec, Measurement, units),
``timer`` (Timer) and ``compare`` (Compare)."""
