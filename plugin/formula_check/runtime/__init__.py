"""The processes that run TensorFlow, and the build's end of them: how they are started,
forked, confined, asked, timed out and ended. What a check computes inside them is
:mod:`..execution`. The messages they exchange are typed in the core (:mod:`..messages`,
:mod:`..messages.replies`, framed by :mod:`..wire`).

In the build process (the engine calls :mod:`.pool` only):

- :mod:`.pool`: N workers lent to one request at a time (:mod:`.idle` hands them out);
- :mod:`.process`: one worker process (start, ask, time out, kill), with its
  :mod:`.stderr_log`, :mod:`.memory` watch and :mod:`.outcome` (the reply the pool gives);
- :mod:`.zygote_client`, :mod:`.kept_client`: the parent's end of the zygote, one per run or
  kept alive between runs (:mod:`.kept_socket`: where it listens, how it is stopped);
  :mod:`.forked`: a worker the zygote forked; :mod:`.control`: their line protocol;
- :mod:`.environment`: the variables a worker may see (the one module faces read).

In the check processes:

- :mod:`.zygote` (imports TensorFlow, forks workers: :mod:`.zygote_server`, and kept alive
  :mod:`.kept_server`), :mod:`.child` (a worker's loop);
- :mod:`.isolation`: one process per check; :mod:`.confinement`: what it may still reach
  (Landlock); :mod:`.reaping`: what a check leaves, ended;
  :mod:`.read_buffer`: the buffer the warm worker reads messages into, which no check inherits;
- :mod:`.warm_worker`: the warm worker made ready, and each check's process; what a check
  runs there is :mod:`..execution`;
  :mod:`.faults`: the checker's own failures, said as such.

In a process of its own, without TensorFlow: :mod:`.oracle_server`, where an oracle of one's
own (the ``oracles`` option) is imported and each of its calls answered (the build's end:
:mod:`..oracles.own_process`).
"""
