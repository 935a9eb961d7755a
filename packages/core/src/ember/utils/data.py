"""``ember.utils.data`` is the same module object as ``ember.data`` (ember-data)."""

import sys

import ember.data as _data

sys.modules[__name__] = _data
