"""Known mistakes of topic `paged-kernel`, one module per mistake, each built on ``Correct``.

``Correct`` is the checkpoint's kernel (notebook 08's solution); a mistake replaces one function
of its chain (``load_block``, ``attend`` or ``paged_decode_kernel``) and ``Buggy`` is the
kernel rebuilt on top of it (:func:`~servelab.testing.paged_kernel.rebuilt`), so grading
``Buggy`` at any step meets the mistake in the function that holds it.
"""

from servelab.grading.mistakes import correct_impl
from servelab.testing.paged_kernel import rebuilt, tl, triton  # triton, set up to interpret

Correct = correct_impl("paged-kernel")
"""The last step's checkpoint: the notebook's own kernel, which every mistake changes."""

__all__ = ["Correct", "rebuilt", "tl", "triton"]
