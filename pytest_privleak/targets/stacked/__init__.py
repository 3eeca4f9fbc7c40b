"""Training k models of one architecture as one: their parameters stacked on a model axis (issue 35).

The seeds of a built-in target (and the reference models of a membership
attack) are k models of the same architecture that differ in their seed and
data. Trained one by one, a small recurrent model on a CPU is bound by the
cost of each operation, not by its arithmetic, so k models cost k times one.
Here the parameters of the k models are stacked on a leading model axis
(``[k, *shape]``) and every operation of the forward and backward pass runs
once for all of them as a batched matrix product or an elementwise operation
over the model axis; each model keeps its own initialisation (its seed), data
order, dropout and word-dropout draws (a generator per model), gradient
clipping, optimiser state and early stopping.

It is the one training path of the recurrent targets (a single model is a
stack of one), and a model's arithmetic does not depend on which models it is
stacked with: on the CPU, model j trained alone and trained among seven give
bitwise-identical weights (``tests/test_stacked_training.py``). After
training each model is unstacked into an ordinary per-seed network, so the
attacks, the cache entries and the figures' pipeline see what they saw before.

``torch.func.vmap`` over ``nn.LSTM`` has no batching rule in torch 2.13
("Batching rule not implemented for aten::lstm.input"), so the recurrence is
written here with batched matrix products (:mod:`.lstm`); the CRF's forward
algorithm is pytorch-crf's, fed the models folded into its batch axis with a
transition matrix per row (:mod:`.crf`).

Modules: :mod:`.params` (stacking, per-model noise, clipping, optimiser
narrowing), :mod:`.layers` (embedding, linear, character CNN), :mod:`.lstm`,
:mod:`.crf`, :mod:`.loop` (the epoch loop), :mod:`.plan` (which models train
together, the cache of many keys).
"""
