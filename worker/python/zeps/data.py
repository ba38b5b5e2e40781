"""Equal work per rank (docs/python.md, "Every rank the same number of
steps").

Under bsp a rank with more steps than another waits in a round the other
never joins. :class:`RankSampler` gives every rank of a job the same number
of batches, in the spirit of ``torch.utils.data.DistributedSampler`` with
``drop_last``: rank r takes every num_workers-th index of one (optionally
shuffled, the same on every rank) order, cut to a whole number of batches
that every rank has. It needs no torch; a ``DataLoader`` takes it as its
``sampler`` (it is an iterable with a length)."""
import numpy as np

__all__ = ["RankSampler", "steps_per_epoch"]


def steps_per_epoch(n, num_workers, batch_size):
    """Batches every rank gets from `n` examples: the same on all ranks."""
    if n < 0 or num_workers < 1 or batch_size < 1:
        raise ValueError("n >= 0, num_workers >= 1 and batch_size >= 1 are needed")
    return (n // num_workers) // batch_size


class RankSampler:
    """Indices of rank `rank`'s examples among `n`, for one epoch at a time.

    ``len()`` is ``steps_per_epoch(n, num_workers, batch_size) *
    batch_size`` on every rank; the ranks' indices are disjoint. With
    `shuffle`, each epoch's order is drawn from ``seed + epoch`` (call
    :meth:`set_epoch` before each epoch, as with DistributedSampler), the
    same order on every rank."""

    def __init__(self, n, rank, num_workers, batch_size, shuffle=False, seed=0):
        if not 0 <= rank < num_workers:
            raise ValueError(f"rank {rank} outside 0..{num_workers - 1}")
        self.n, self.rank, self.num_workers = int(n), int(rank), int(num_workers)
        self.batch_size, self.shuffle, self.seed = int(batch_size), bool(shuffle), int(seed)
        self.epoch = 0
        self.steps = steps_per_epoch(self.n, self.num_workers, self.batch_size)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def indices(self):
        """This epoch's indices of this rank as an int64 array."""
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(self.n)
        else:
            order = np.arange(self.n)
        mine = order[self.rank::self.num_workers]
        return mine[:self.steps * self.batch_size].astype(np.int64)

    def batches(self):
        """This epoch's indices in `steps` batches of batch_size."""
        return self.indices().reshape(self.steps, self.batch_size)

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self):
        return self.steps * self.batch_size
