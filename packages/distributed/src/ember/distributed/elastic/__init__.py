"""torch.distributed.elastic's names that worker scripts import (the launcher itself is
ember.distributed.run)."""
