"""The held-out real logs (tests/fixtures/joblogs_wild/: failed-job logs from public threads of many projects,
labelled in LABELS.yaml, measured by bench/postmortem_wild.py) as a regression gate: every file fleetdx reads
right today (class, and the first rank and host where labelled) stays right, and the known misses are listed
here, each with why, so that fixing one means moving it out of KNOWN_MISSES (the test fails when a listed miss
starts being right: the list cannot go stale)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import LogFiles

WILD = Path(__file__).parent / "fixtures" / "joblogs_wild"
LABELS: dict[str, dict[str, Any]] = yaml.safe_load((WILD / "LABELS.yaml").read_text())

#: file -> why fleetdx misses it today
KNOWN_MISSES = {
    "48-ray47461-raylet-worker-died-sigkill-torchtrainer-worker0.log": "UNKNOWN: Ray's 'A worker died or was killed' "
    "report (three possible causes, OOM among them) is read as a death of unknown cause on its node; the label takes "
    "the thread's 'OOM-looking issue' and rank 0 from 'Worker 0 has failed', which is not read",
    "707-searchr1-45-raylet-worker-died-connection-error-code-2-ip-10.226.129.21-overrides-line-cut.log": "UNKNOWN: "
    "a Ray worker that vanished (connection error code 2) is a death of unknown cause on its node, as the labels of "
    "812, 1362 and 1510 have it; this label takes the first of the causes Ray lists (the OOM killer)",
    # added with logs 91-136 (each: what fleetdx says today, and the deciding line)
    # added with logs 137-180
    "162-akash244-dmesg-T-xid43-xid31-app-faults-then-xid94-contained-node4.log": "CUDA_ERROR: the dmesg spans days "
    "and other jobs; XID 43 (an application fault) on another GPU days before the XID 94 comes first. Given the "
    "job's window (--since) the XID 94 is the cause",
    # added with logs 181-222
    "183-msswift6849-reversed-line-order-childfailederror-root-cause-rank19-sigabrt-k8s-host.log": "a torchrun "
    "summary pasted in reverse line order: its rank and host lines come before their entry's header and are not "
    "joined to it",
    "190-vllmascend486-npu-rank1-hcclallreduce-error-code-6-ei0006-remote-rank-did-not-send-in-time.log": "CANN's "
    "EI0006 ('Remote Rank did not send the data in time') is read as a timeout's observer, but torch_npu's "
    "RuntimeError 'OPS function error: HcclAllreduce, error code is 6' (a code the catalog does not read) ranks "
    "above it as the rank's crash",
    # added with logs 231-247
    "241-qwen3vl1756-web-console-table-pipes-timestamp-master-0-prefix-terminate-distbackenderror-pg-rank0-illegal-"
    "memory-access.log": "CUDA_ERROR naming no node: a web console's table ('  |   | STAMP master-0 >> ... |') "
    "around every line is not read as a prefix, so master-0 is not its host",
    # added with logs 251-264
    "262-tinygrad11442-mlperf-bert-8xmi300x-ellipsis-traceback-memoryerror-cannot-allocate-no-memory-available.log": (
        "PROCESS_CRASH: tinygrad's AMD allocator raises a bare Python MemoryError ('Cannot allocate N bytes: no "
        "memory is available'), which names no device"
    ),
    # added with logs 301-367
    "311-accelerate2468-deepspeed-pdsh-trainer-2-tcpstore-no-route-to-host-wrong-master-interface.log": "NCCL_NETWORK_"
    "ERROR: an unreachable rendezvous store (errno 113, No route to host) is read as the network's failure, as log "
    "89's label has it; this label takes the thread's diagnosis (DeepSpeed picked the wrong interface for the "
    "master's address), a configuration error the log itself does not show",
    # added with logs 401-465
    "401-cscfi1-mahti-slurmstepd-execve-torchrun-no-such-file-srun-task0-exit-code-2.log": "rank: srun's task 0 is "
    "not read as rank 0 because the line names torchrun (a launcher that starts several ranks per task); torchrun "
    "never started, so no rank ran at all",
    "413-wespeaker171-jobs-sharing-node-rendezvous-shutdown-failed-broken-pipe-rendezvousconnectionerror.log": "the "
    "label takes the thread's diagnosis (two jobs sharing one rendezvous endpoint: a configuration error); the log "
    "shows only a lost rendezvous and a broken pipe",
    "456-optimumhabana1779-gaudi-multinode-pdsh-ip-rank14-prefix-broadcast-graph-compile-failed-synstatus26.log": "the "
    "label takes the thread's diagnosis (the environment did not reach the second node); the log shows Gaudi's "
    "'Graph compile failed. synStatus 26' RuntimeError, read as that rank's crash",
    # added with logs 501-535
    "527-openrlhf265-multinode-ppo-docker-rayworkervllm-c10d-client-socket-timed-out-1800s-connect-172-17-0-2-then-"
    "actor-watchdog-allreduce.log": "NCCL_TIMEOUT: the label takes the thread's diagnosis (a Docker-internal address "
    "the other node cannot reach: configuration); the log shows a store connection timeout and a watchdog timeout",
    "531-gptneox1147-two-nodes-hostfile-pdsh-prefix-node2-last-error-net-call-to-recv-failed-connection-refused-"
    "redacted-ip.log": "the peer is redacted by the poster ('NODE2_IP'), so the observer's peer cannot be matched to "
    "node2",
    # added with logs 651-757 (round 9)
    "659-trl1164-sft-fsdp-peft-pt-hang-after-epoch-torchrun-root-cause-rank1-sigabrt-ranks2-3-pod-host.log": "the "
    "label takes the issue's words (the run froze and timed out); the log shows only torchrun's summary of three "
    "ranks' SIGABRT, read as rank 1's crash as log 359's label has it",
    "702-myria3d123-ddp-srun-data-prep-tqdm-glued-step-cancelled-task0-terminated-blocking-wait.log": "the label "
    "takes the thread's diagnosis (NCCL blocking wait timing out while rank 0 prepared data); the log shows only "
    "the step cancelled with no reason and task 0 terminated",
    "709-pytorch76287-jeanzay-slurm-elastic-node-keepalive-heartbeat-rendezvousconnectionerror-hang-8h.log": "UNKNOWN: "
    "the crash is in a file attached to the issue; the log holds only the agent's keep-alive warnings",
    "710-nccltests36-2020-azure-nc24rs-mpirun-2node-unhandled-system-error-process-rank1-exit-3.log": "the label "
    "takes the maintainer's diagnosis (InfiniBand); the log shows 'unhandled system error' on both hosts and "
    "mpirun's first process to exit (rank 1), read as that rank's exit",
    "711-nccltests294-h100-ib-sharp-bootstrap-address-family-33621-internal-error-async-thread.log": "CONFIG_ERROR: "
    "NCCL's 'connecting to address with family N is neither AF_INET nor AF_INET6' is read as its catalog row has "
    "it (nccl#1837: a socket interface that does not exist); the label leaves it an internal error",
    "753-discussray8598-torchtrainer-fractional-gpu-ddp-verify-model-across-ranks-nccl-error-cut.log": "the NCCL "
    "error's own line is cut from the excerpt; the label takes the thread's diagnosis (workers sharing one GPU)",
    # added with logs 851-872 (round 10)
    "856-centerformer4-2022-torch-distributed-launch-2proc-a100-k8s-failed-exitcode-minus11-local-rank0-traceback-"
    "cut.log": "no host: the host is named only by mmcv's 'Start running, host: user@HOST' info line, which is not "
    "read as the node of a one-node job's events",
    "861-llamacpp4792-mpi-jetson-cluster-bad-termination-exit-code-134-node1-signal-15-backtick-glued.log": "the "
    "host is named node1 (hydra's 'RUNNING AT jetson@node1' read as user@host); the label keeps 'jetson@node1'",
    "868-gpustack2021-ascend-310p-mindie-4-card-deepseek-r1-32b-hcclcomminitrootinfo-failed-error2-rank1-allgather-"
    "runner.log": "UNKNOWN: MindIE's HCCL runner lines are not in the catalog",
    "871-torchccl54-oneccl-ccl-warn-atl-ofi-ccl-error-pthread-create-returns-22-failed-to-start-worker-0.log": "the "
    "label reads oneCCL's 'pthread_create returns 22' (worker affinity) as configuration; read as the rank's error",
    # added with logs 801-815 (round 10)
    "802-sglang10216-k8s-2x8xh100-deepseekv3-rank1-pg2-failure-detected-by-watchdog-seq40231-nccl-info-"
    "interleaved.log": "NCCL_TIMEOUT: the watchdog's timeout is read; the label says UNKNOWN (the thread shows "
    "no first failure)",
    "814-openrlhf1139-4xh100-ppo-custom-reward-func-make-experience-raytaskerror-workercrashederror-remoterewardmodel-"
    "line-cut.log": "PROCESS_CRASH: Ray's WorkerCrashedError is read as the worker's crash; the label takes the "
    "thread's title (Slurm's OOM kill)",
    # added with logs 901-912 (round 10)
    "901-skypilot825-spot-2node-resnet-worker-vm-killed-node-0-torchrun-exitcode-minus6-exit-barrier-sock"
    "et-timeout-ray-prefix.log": (
        "the label takes the poster's words (the worker VM was killed); the log shows rank 0's SIGABRT and a"
        " socket timeout at the exit barrier, read as rank 0's crash"
    ),
    "909-nccl879-nccl-hostid-2node-16gpu-resnet-p-worker-0-proxy-call-to-rank1-failed-connect-ddp-init-traceback.log": (
        "the label takes the issue's title (NCCL_HOSTID set the same on both nodes); the log shows a failed"
        " proxy connect, read as a network error"
    ),
    # added with logs 951-968, 1001-1006, 1051-1068 (round 11)
    "952-megatronllm107-verify-correctness-torchrun-root-cause-rank0-exitcode1-node0.log": "the label takes the "
    "thread's diagnosis (an assert on the data split); the log shows only torchrun's root cause, exit code 1",
    "958-detectron2-1439-spawn-process1-illegal-memory-access-frames-only.log": "UNKNOWN: the excerpt holds only C++ "
    "frames and spawn's bare 'Exception: '; the CUDA error is in the thread's title",
    "964-bagel295-fsdp-hybrid-shard-two-nodes-rank15-traceback-quote-marker.log": "UNKNOWN: rank 15's traceback is "
    "cut before its exception line; the label takes the thread's title (an IndexError in FSDP's hybrid-shard setup)",
    "966-deepspeed7319-qwen3-32b-zero3-2-nodes-rank10-traceback-oom-cut.log": "UNKNOWN: rank 10's traceback is cut "
    "before its exception line; the label takes the thread's words (OOM while training)",
    "968-mmagic531-torchelastic-worker-status-failed-json-no-error-wrapped-dgx-r107-3.log": "no host: torch 1.9's "
    "torchelastic.worker.status.FAILED events (JSON, raw_error '<NONE>') are not read; no cause is found, as the "
    "label says, but the label names their host",
    "1060-chatglm2-347-deepspeed-2080ti-killing-subprocess-then-local-rank1-sigkill-handler-line-cut.log": "OOM_HOST: "
    "DeepSpeed's launcher killing its subprocesses is read as the likeliest silent death (the OOM killer); its "
    "'exits with return code' line, which would say, is cut; the label takes the thread's title (a crash of rank 1)",
    # added with logs 1101-1114, 1201-1214 (round 12)
    "1113-awsomedistributed192-srun-l-10-prefix-broadcast-ncclsystemerror-software-caused-connection-abort-one-line"
    ".log": "NCCL_NETWORK_ERROR: a connect to 127.0.0.1 that failed is read as the network's; the label takes the "
    "maintainer's fix (NCCL_SOCKET_IFNAME: a socket interface set-up error)",
    "1214-trl3436-fsdp-sft-8xrtx3080-unprefixed-torch-outofmemoryerror-gpu0-then-rank0-traceback.log": "no rank: "
    "the OOM line is pasted without its rank prefix above rank 0's traceback; only device asserts and NCCL WARN "
    "lines take the rank of the traceback that follows them",
    "1159-vllm7896-lws-k8s-405b-tp8-pp2-replica-restarting-ray-worker-init-device-error.log": "UNKNOWN: vLLM's "
    "'Error executing method init_device' names no error; the label takes the thread's title (an NCCL unhandled cuda "
    "error)",
    "1161-pytorch130113-slurm-node155-3gpu-torchrun-childfailederror-root-cause-rank0-nccl-unhandled-cuda-error.log": (
        "PROCESS_CRASH: torchrun's root cause is rank 0's exit code 1; the label takes the thread's title "
        "(ncclUnhandledCudaError)"
    ),
    "1162-kubeflowtrainer999-2019-gke-preemptible-tfjob-failed-1-worker-replica-status.log": "UNKNOWN: a TFJob's "
    "status ('1 Worker replica(s) failed') names no cause; the label takes the poster's words (a preempted node)",
    "1164-llmfoundry258-composer-4gpu-g5-docker-finetune-building-trainer-then-launcher-error-line-cut.log": "UNKNOWN:"
    " composer's launcher line is cut ('ERROR:composer.cli.lau'); the label takes the thread's title (rank 2, -7)",
    # added with logs 1251-1264, 1301-1314, 1351-1362 (round 13)
    "1251-paddle10608-2018-v100-parallelexecutor-enforcenotmet-unhandled-cuda-error-nccl-helper-h93.log": "UNKNOWN: "
    "Paddle 0.x's 'EnforceNotMet: unhandled cuda error at [nccl_helper.h:93]' is not read; the label takes the "
    "poster's words (NCCL was not installed)",
    "1258-lmdeploy2204-internvl2-26b-turbomind-tp2-api-server-tm-info-then-terminate-recursively-aborted.log": "PROCESS"
    "_CRASH: the log shows only the abort; the label takes the thread's title (an illegal memory access)",
    "1260-gitcode-blog-vllm-3x8-4090-multinode-nccl-warn-socketstartconnect-software-caused-connection-abort-ellipsis-"
    "unhandled-system-error.log": "NCCL_NETWORK_ERROR: the system error below a failed connect is that connect's; "
    "the label takes the blog's diagnosis (interfaces set up differently: configuration)",
    "1305-horovod3625-tf-tag-output-ncclcomminitrank-errorcheck-segfault-biomind-rank0-backtrace-cut.log": "PROCESS_"
    "CRASH: the log shows rank 0's segfault; the label takes the thread's title (ncclCommInitRank: unhandled cuda "
    "error)",
    "1310-chainermn285-py27-pure-nccl-allreduce-grad-two-interleaved-tracebacks-error-line-cut.log": "UNKNOWN: the "
    "error line is cut from the excerpt; the label takes the thread's title",
    "1314-tensorpack782-2018-tf-ps-worker-gpu-master-init-unavailable-os-error-worker-before-ps.log": "UNKNOWN: "
    "TensorFlow's 'Master init: Unavailable: OS Error' is not read; the label takes the commenter's diagnosis (the "
    "worker started before the parameter server)",
    "1357-skyrl87-async-vllm-engine-ray-prefix-nccl-unhandled-system-error-actor-died-creation.log": "no host: the "
    "NCCL error's Ray worker (pid 31037) names no ip; the label takes the ip of another actor's header",
    "1358-msswift6107-megatron-2node-rank10-reduce-scatter-unhandled-system-error-ibv-reg-mr-iova2-quoted.log": "no "
    "rank: rank 10's system error and the host's ibv_reg_mr WARN (device 0, no rank) are not joined",
    # added with logs 1401-1420, 1451-1465 and 1501-1515 (round 14)
    "1459-paddle24809-edl-fleet-one-node-glog-sigterm-from-pid30147-two-workers.log": "PROCESS_CRASH: glog's "
    "'SIGTERM ... received by PID 40650 from PID 30147' is a process ended by a signal; the label says UNKNOWN "
    "(the NCCL error of the thread's title is not in the excerpt)",
    "1462-torchccl48-two-node-torch-distributed-launch-oneccl-hang-after-ccl-warn-atl-ofi.log": "UNKNOWN: a oneCCL "
    "job that hangs after a CCL_WARN about its launcher prints no error and no timeout; the label (from the thread) "
    "is a hang",
    "1401-nccl1241-megatron-pretrain-gpt-torchrun-childfailed-failures-rank3-invalid-usage-title.log": "PROCESS_CRASH:"
    " the log shows torchrun's failure entry of rank 3 (exit code 1); the label takes the thread's title (NCCL's "
    "invalid usage)",
    "1407-uniter31-2020-horovod-torch-rank1-shut-down-mpirun-first-process-rank0-oom-in-thread.log": "PROCESS_CRASH:"
    " mpirun names rank 0 the first process to exit; the label takes the poster's later comment (a GPU OOM)",
    "1420-torchmetrics2300-2023-lightning-slurm-ntasks-96-devices-6-member-1-of-96-job-cancelled.log": "UNKNOWN: the "
    "job was cancelled ('*** JOB N ON HOST CANCELLED'); the label takes the thread's diagnosis (--ntasks 96 against "
    "6 devices)",
    # added with logs 1551-1566, 1601-1614 and 1651-1664 (round 15)
    "1551-llamafactory2555-k8s-ppo-zero3-childfailed-ranks1-3-exitcode1-root-cut.log": "PROCESS_CRASH: torchrun's "
    "entries of ranks 1-3 (exit code 1), the root cause cut; the label takes the thread's title (a PPO + ZeRO-3 setup)",
    "1555-openrlhf970-longctx-actor-dead-ip-glued-ray-lines-watchdog-broadcast-repeated.log": "NCCL_TIMEOUT: an actor "
    "dead of 'connection error code 2' beside watchdog timeouts; the label takes the title (the OOM killer)",
    "1561-axolotl1041-3nodes-x2gpu-zero2-nccl-trees-then-exitcode-minus7-sigbus-local-rank1-pid730.log": "rank 1: "
    "torchrun's local rank 1 (pid 730); the label takes rank 5 from an NCCL trees line of pid 730 behind another "
    "task's prefix",
    "1563-milabench289-torchtune-lora-ddp-nodes-remote-stdout-prefix-signalexception-signal15.log": "PROCESS_CRASH: "
    "'SignalException: Process N got signal: 15'; the label says UNKNOWN (who sent SIGTERM is not shown)",
    "1565-gcp-aiinfra383-megatron-gke-a3-tcpx-critical-xid-then-traceback-illegal-memory-access-title.log": "UNKNOWN:"
    " 'Detected Critical Xid Error' names no XID; the label takes the thread's title (an illegal memory access)",
    "1566-chinesellamaalpaca2-376-multimachine-wsl-root-cause-rank0-sigabrt-host-redacted.log": "PROCESS_CRASH: "
    "torchrun's root cause is rank 0's SIGABRT; the label takes the thread's title (an illegal memory access)",
    "1605-paddle27081-2020-aistudio-launch-watch-local-trainers-popen-join-attributeerror-train-ret-1-abort-ranks-0-3"
    ".log": "CONFIG_ERROR: the launcher's own AttributeError (in its teardown) is read above its report of the "
    "aborted trainers; the label takes the thread's title (an NCCL error)",
    "1606-horovod2656-pytorch-8gpu-mpirun-primary-job-aborted-one-gpu-out-of-memory-per-poster-cut.log": "UNKNOWN: "
    "mpirun's abort banner alone; the label takes the poster's words (one GPU ran out of memory)",
    "1660-metaseq554-non-slurm-multinode-distributed-init-allreduce-internal-error-duplicate-gpu-cut.log": "NCCL_"
    "INTERNAL_ERROR: 'Internal check failed' with an empty 'Last error:'; the label takes the title (a duplicate GPU)",
    # added with logs 1701-1716, 1751-1767 and 1801-1814 (round 16)
    "1702-vllm20170-v1-multiproc-terminate-distbackenderror-then-vllmworker-rank0-execute-model-traceback-cut.log": ""
    "PROCESS_CRASH: a c10::DistBackendError ending a process, its what() cut; the label says UNKNOWN",
    "1712-trtllmbackend33-2023-chatglm2-tritonserver-model-table-unavailable-assertion-mpisize-eq-tp-times-pp.log": ""
    "UNKNOWN: TensorRT-LLM's 'Assertion failed: mpiSize == tp * pp' is wrapped inside a table's cells",
    "1713-lmdeploy130-2023-internlm7b-tp2-workspace-turbomind-chat-2xt4-ft-error-cuda-runtime-invalid-argument-"
    "allocator-aborted.log": "PROCESS_CRASH: a CUDA 'invalid argument' then 'Aborted'; the label takes the "
    "maintainer's answer (the launcher did not support tensor parallelism)",
    "1714-deepspeed7021-2025-zero3-cpu-offload-llama-inference-2gpu-pg-not-destroyed-killing-subprocess-local-rank1-"
    "return-code-1.log": "PROCESS_CRASH: local rank 1's return code 1; the label takes the title (OOM)",
    "1752-fuser3055-mpirun-np4-test-multidevice-teardown-hang-nccl-2-23-4-socket-info-minus3-dgx1v-loki-23.log": ""
    "UNKNOWN: a hang whose only lines are NCCL INFO '-> 3' return chains",
    "1762-nccltests24-2019-openmpi-two-v100-servers-gdr-ib-completion-error-12-vendor-129-gpu5-gpu4-then-illegal-"
    "memory-access.log": "CUDA_ERROR: the IB completion errors on both hosts are read, second to gpu5's later Cuda "
    "failure; the label calls the CUDA error their consequence",
    "1767-aimariokart64-3-2025-ddp-mp-spawn-rank3-should-dump-flag-tcpstore-rank2-recvvalue-0-bytes-after-process0-"
    "assertionerror.log": "UNKNOWN: only the TCPStore's fallout on ranks 3 and 2; the label takes the post (an "
    "AssertionError in process 0)",
    "1806-pytorch43685-2020-ddp-syncbatchnorm-gloo-nvidia-smi-gpu-is-lost-nvrm-ailcm-ai1.log": "the host: "
    "nvidia-smi's 'GPU is lost' names no host; the kernel lines of ailcm-ai1 name the GPU's PCI address, no Xid",
    "1811-nanogpt55-2023-multinode-ddp-torchrun-some-nccl-ops-failed-taking-process-down-hard-wrapped.log": "UNKNOWN:"
    " ProcessGroupNCCL's 'taking the entire process down' alone; the label takes the thread's fix (NCCL_IB_DISABLE)",
    "1812-opennmt1606-2019-gcp-two-nodes-16-gpus-hang-after-init-complete-rank8-net-socket-ring-setup.log": "UNKNOWN:"
    " a hang after NCCL's init lines, no error printed",
    "1813-wenet812-2021-8-nodes-x-8-gpus-gloo-hang-at-start-training-on-multiple-gpus-info-lines.log": "UNKNOWN: "
    "INFO lines of a hang at start; the label takes the thread's fix (the nccl backend for gloo)",
    # added with logs 1851-1865, 1901-1912 and 1951-1959 (round 17)
    "1906-ray31828-2023-torchtrainer-worker0-returns-then-worker-died-connection-error-code-2-raytaskerror-"
    "ansi-residue.log": (
        "PROCESS_CRASH: the driver's RayTaskError(RuntimeError) is read as the worker's crash; the label "
        "takes the raylet's 'connection error code 2' as a death of unknown cause"
    ),
    "1956-sglang18980-glm5-b200-gcp-logging-severity-prefix-tp1-scheduler-hit-an-exception-traceback-cut.log": (
        "UNKNOWN: SGLang's 'Scheduler hit an exception' with its exception cut; the label reads the TP1 "
        "prefix as rank 1's crash"
    ),
    # added with logs 2051-2465 (round 20)
    "2061-mlcommons-training272-2019-tf113-collectiveallreduce-16-workers-ring-reducer-unavailable-os-error.log": (
        "UNKNOWN: TensorFlow 1.13's 'Aborting RingReduce with Unavailable: OS Error' is not in the catalog"
    ),
    "2062-paxml77-1024-gpus-quoted-coordination-service-registertask-grpc-deadline-exceeded.log": (
        "UNKNOWN: XLA's coordination-service agent's DEADLINE_EXCEEDED at RegisterTask is not in the catalog; the "
        "label reads it as a hang"
    ),
    "2206-torchtune2643-llama4-scout-lora-8xh100-save-checkpoint-barrier-rank6-gloo-runtimeerror-cut.log": (
        "PROCESS_CRASH: rank 6's gloo RuntimeError, its message cut, is read as its crash; the label says UNKNOWN"
    ),
    "2214-nanotron108-pp-allocation-default5-default4-interleaved-traceback-check-model-has-grad-zero-params.log": (
        "UNKNOWN: the interleaved tracebacks are cut before their exception line; the label takes the thread's "
        "diagnosis (a pipeline stage with no parameters)"
    ),
    "2263-awsofinccl801-slingshot-cxi-2node-torch-init-no-default-rgroup-vni-for-cxi0.log": (
        "UNKNOWN: libfabric cxi's <warn> about no default VNI is not read; the failure in the thread's title is not in "
        "the excerpt"
    ),
    "2265-mpich7943-aurora-gpu-aware-2rank-ze-error-mpl-gpu-imemcpy-rank1-abort-internal-recv-padded.log": (
        "the rank: the ZE Error line names none; MPICH's 'Abort(...) on node 1 (rank 1 in comm 0)' below it is not "
        "joined to it"
    ),
    "2302-nccl224-horovod-mpirun-tag-output-gpu7-rank4-ib-socket-creation-failed-address-family-not-supported.log": (
        "NCCL_NETWORK_ERROR: the failed socket creation is read as a socket error, a network observer; the label "
        "reads 'Address family not supported' as the host's configuration"
    ),
    "2304-sglang3460-tp20-five-containers-tp2-scheduler-exception-init-torch-distributed-unindented.log": (
        "UNKNOWN: TP2's scheduler traceback is cut before its exception; the label takes the thread's title"
    ),
    "2306-vllm29265-v1-ray-executor-enginecore-dp0-actordiederror-rayworkerwrapper-no-gpu-on-node.log": (
        "UNKNOWN: a Ray actor's death is a death of unknown cause; the label takes the thread's diagnosis (no GPU on "
        "the node)"
    ),
    "2307-kuberay3436-rayservice-vllm-deployment-replica-ip-raytaskerror-runtimeerror-no-gpu-available.log": (
        "PROCESS_CRASH on the replica's node (its name holds colons, read since round 30): the RayTaskError's "
        "RuntimeError is cut; the label takes the title (no GPU available)"
    ),
    "2308-ultralytics19375-ddp-rank1-broadcast-amp-distbackenderror-unhandled-cuda-error-oom-quote-prefix-cut.log": (
        "CUDA_ERROR: the log shows NCCL's 'unhandled cuda error'; the label takes the OOM from the title and a "
        "cross-post"
    ),
    "2311-nvbandwidth39-mpijob-pod-tensorflow-benchmarks-worker-0-multinode-cumemcreate-not-permitted-rank0-"
    "cut.log": "the rank and host: the cuMemCreate failure's line names neither; the label takes them from around it",
    "2312-ray49260-ray-train-amd-4gpu-torchtrainer-trial-task-failed-invalid-device-ordinal.log": (
        "UNKNOWN: Ray Tune's 'Trial task failed' with its error cut; the label takes the title (invalid device ordinal)"
    ),
    "2315-awsdlc3746-sagemaker-hf-estimator-smddp-init-failed-unexpectedstatusexception-client-traceback.log": (
        "PROCESS_CRASH: only the SageMaker client's UnexpectedStatusException; the label takes the title (SMDDP's "
        "initialisation)"
    ),
    "2451-horovod642-mpirun-np2-rank0-sys-exit-primary-job-nonzero-cut.log": (
        "UNKNOWN: mpirun's 'primary job terminated normally' banner, cut; the label takes rank 0 from the thread"
    ),
    "2454-hkproj-transformer-distributed1-distbackenderror-socketstartconnect-no-route-to-host.log": (
        "NCCL_NETWORK_ERROR: 'No route to host' is read as the network's; the label takes the fix "
        "(NCCL_SOCKET_IFNAME: a configuration error)"
    ),
    "2461-nccltests322-mpirun-many-hosts-unhandled-cuda-error-first-process-251-exit-3.log": (
        "the rank: mpirun's first process (251) is not joined to HCA-14's 'Test NCCL failure' line"
    ),
    "2464-nccl795-aws-p4d-two-node-socket-recv-broken-pipe-proxy-connect-rank9-after-segfault.log": (
        "NCCL_NETWORK_ERROR: the log shows socket errors only; the label takes the poster's words (a segfault before "
        "it, not in the log)"
    ),
    # added with logs 2501-2516
    # added with logs 2001-2009
    "2002-te994-deepspeed-hostfile-tp4-world8-userbuffers-host-nccl-error-ub-init.log": (
        "NCCL_INTERNAL_ERROR: TransformerEngine's userbuffers print only 'Failed, NCCL error ...:223' with an empty "
        "result (an NCCL call failed, no result named); the label takes the maintainers' answer (the overlap needs "
        "tp size == world)"
    ),
    "2009-megds207-torchrun-8proc-sigterm-local-rank0-exitcode-minus6-device-side-assert-thread.log": (
        "PROCESS_CRASH: the excerpt is torchrun's side only (local rank 0 exited -6, SIGABRT); the label takes the "
        "device-side assert from the thread's title and another part of the post"
    ),
    # added with logs 2601-2762 (round 21)
    "530-unsloth1937-open-r1-grpo-deepspeed-import-unsloth-patchfastrl-unboundlocalerror-rank4-then-exitcode1-"
    "local-rank1.log": (
        "CONFIG_ERROR rank 4: rank 4's UnboundLocalError (the only error line shown) is read before torchrun's "
        "'failed (exitcode: 1)' of local rank 1, which the label takes"
    ),
    "2601-torchtitan1570-ep-mesh-torchrun-childfailederror-no-other-failures-cut.log": (
        "UNKNOWN: a ChildFailedError cut before its root cause; alone it is context, the label reads it as a crash"
    ),
    "2608-pytorch124380-ddp-multinode-init-dev1-system-error-proxy-service-localrank2-connection-closed.log": (
        "NCCL_NETWORK_ERROR: device 1's system error shows only as '-> 2' return trails; device 2's 'Connection "
        "closed by remote peer' is read"
    ),
    "2651-llmd352-vllm-dp16-k8s-crashloop-workerproc-nccl-unhandled-system-error-dev-shm-full.log": (
        "NCCL_INTERNAL_ERROR: the log shows 'unhandled system error' only; the label takes the title (/dev/shm full)"
    ),
    "2656-kuberay3168-rayservice-vllm-mi300x-libcuda-so-1-importerror-init-worker-error.log": (
        "UNKNOWN: the ImportError of libcuda.so.1 is inside a WARNING line (vLLM's optional import), and "
        "init_worker's traceback is cut"
    ),
    "2659-lmdeploy1221-mpirun-tritonserver-2x4-l40s-nccl-utils-internal-error-caught-signal-4-node-171.log": (
        "PROCESS_CRASH: UCX's 'Caught signal 4' just below TensorRT-LLM's 'Failed, NCCL error ... internal error' "
        "is read as a crash of its own"
    ),
    "2706-llmc727-mpirun-8gpu-dataloader-assertion-shard-ntok-sigabrt-149-130-218-240.log": (
        "PROCESS_CRASH: the failed C assert ends in SIGABRT, read as a crash; the label reads the assertion's "
        "meaning (a data shard too small for 8 processes)"
    ),
    "2709-rlhfv17-torchrun-local-rank1-exitcode1-cuda-ordinal-childfailederror.log": (
        "PROCESS_CRASH rank 1: torchrun's exit code 1 of local rank 1; the label takes the title (invalid device "
        "ordinal), which the excerpt does not show"
    ),
    "2751-grain802-jax-multihost-k8s-task1-different-incarnation-aborted.log": (
        "UNKNOWN: XLA's coordination service reporting task 1 'tried to connect with a different incarnation' (it "
        "restarted) is not in the catalog"
    ),
    "2752-mindspore-discuss1156-ascend-4node-32rank-event-wait-timeout-hccl-exec-timeout.log": (
        "UNKNOWN: Ascend's EVENT_WAIT timeout (HCCL_EXEC_TIMEOUT) is not in the catalog"
    ),
    "2753-alpa907-ray-meshhostworker-rendezvous-rayactorerror-nccluniqueidstore-killed.log": (
        "UNKNOWN: a Ray actor's death is a death of unknown cause; the label takes the thread's diagnosis"
    ),
    "2757-nemorl1051-qwen3-32b-dtensor-vllm-ray-core-worker-check-failed-already-initialized.log": (
        "PROCESS_CRASH: Ray's failed CHECK (core worker already initialized) is read as the crash it ends in; the "
        "label reads it as a setup error"
    ),
    "2759-vllmascend7676-dp-tp-ep-workers-aclrt-synchronize-stream-timeout-507011.log": (
        "UNKNOWN: Ascend's stream synchronize timeout (507011) is not in the catalog"
    ),
    # added with logs 2801-2963 (round 22)
    "2852-atmorep55-srun-label-wrapped-rank0-pg0-watchdog-unspecified-launch-failure.log": (
        "the rank: the watchdog's line is wrapped mid-word ('CUDA erro' / 'r: unspecified launch failure'), and the "
        "[rank0] prefix stays on the first half"
    ),
    "2856-msswift3934-grpo-multinode-hang-g183-glued-nccl-info-service-thread-connection-closed.log": (
        "UNKNOWN: a hang whose only lines are NCCL INFO of the teardown, glued together"
    ),
    "2864-xgboost7982-dask-cuda-multinode-nccl-proxy-connect-broken-pipe-bridge-ip-connection-closed.log": (
        "NCCL_NETWORK_ERROR: the broken pipe and closed connection are read as the network's; the label takes a "
        "commenter's fix (NCCL_SOCKET_IFNAME, a docker bridge address)"
    ),
    "2905-sglang5096-cloud-logging-reverse-order-killed-sigquit-dev-shm-nccl-segment.log": (
        "OOM_HOST: the shell's 'Killed' is read as the OOM killer; the /dev/shm segment error above it is cut"
    ),
    "2910-nccl983-mpirun-two-servers-ib-channels-then-primary-job-aborted-sigbus-title.log": (
        "UNKNOWN: mpirun's abort banner alone; the label takes the title (SIGBUS)"
    ),
    "2912-lmflow430-3090-llama7b-deepspeed-markdown-link-damage-killing-subprocess-return-code-minus7.log": (
        "OOM_HOST: markdown link damage cut the return code out of DeepSpeed's exit line, so the launcher's killing "
        "of its subprocesses is read as the likeliest silent death (the OOM killer); the label takes the title (-7)"
    ),
    "2913-autocast381-post-fit-allreduce-numel1-watchdog-srun-aborted-abridged.log": (
        "PROCESS_CRASH: the poster abridged the watchdog's WorkNCCL(...) line, so srun's 'Aborted' is the only "
        "event read"
    ),
    "2955-chinesellamaalpaca2-274-multinode-rdzv-random-run-id-connection-reset-on-shutdown.log": (
        "NCCL_NETWORK_ERROR: the connection reset is read; the label reads the random rendezvous run_id as the "
        "setup error"
    ),
    "2958-u2pl62-cluster-2gpu-torch-launch-calledprocesserror-local-rank1-status-cut.log": (
        "PROCESS_CRASH: torch.distributed.launch's CalledProcessError is read as a crash; the label says UNKNOWN "
        "(its exit status is cut)"
    ),
    "2963-yolox309-two-gpu-hang-at-epoch1-ctrl-c-launch-by-subprocess.log": (
        "UNKNOWN: the user's KeyboardInterrupt (Ctrl-C) tells no failure of its own, and the hang it stopped "
        "printed nothing; the label reads the hang from the thread"
    ),
    # added with logs 3051-3165 (round 23)
    "3053-llama-megatron-4gpu-childfailederror-rank1-optimizer-oom-title.log": (
        "PROCESS_CRASH rank 1: torchrun's root cause, exit code 1; the OOM is past the excerpt's cut (the label takes "
        "the title)"
    ),
    "3058-vllm-tp-nccl-nvls-cuda-failure-3-initialization-error.log": (
        "CONFIG_ERROR: NCCL's 'Cuda failure 3' in nvls.cc is read as NVLink SHARP's setup (the NVLS rows); the "
        "label keeps the CUDA error"
    ),
    "3103-dsmii444-openai-api-server-tp2-llama70b-server-crashed-for-some-reason.log": (
        "PROCESS_CRASH: the MII client's RuntimeError 'server crashed for some reason' is read as a crash; the "
        "label says UNKNOWN (the server's own error is not shown)"
    ),
    "3104-tf26132-distributed-nccl-xring-hang-at-end-gdb-bt-grpcserver-join.log": (
        "UNKNOWN: a hang shown only by gdb's backtrace of the stuck process; no error line"
    ),
    "3108-paddle14620-parallelexecutor-broadcast-ncclgroupend-check-failed-1-vs-0.log": (
        "PROCESS_CRASH: Paddle's failed CHECK on ncclGroupEnd() '(1 vs. 0)' names NCCL's result 1 "
        "(ncclUnhandledCudaError) only as a number, which is not read"
    ),
    "3154-pytorch80772-torchx-k8s-ddp-8x1-rank0-pod-rendezvoustimeouterror-dns-race.log": (
        "NCCL_NETWORK_ERROR: the RendezvousTimeoutError is read as the store not reachable; the label takes the "
        "thread's diagnosis (the pods' DNS names not yet published)"
    ),
    "3001-vllm22479-blackwell-tp2-apiserver-enginedeaderror-500-shutdown.log": (
        "PROCESS_CRASH: vLLM's EngineDeadError is read as a crash; the label says UNKNOWN (the engine core's own "
        "error is cut)"
    ),
    "3003-sglang4766-deepseekv3-2xh100-child-node-tp10-scheduler-exception-init-torch-distributed-cut.log": (
        "the rank: UNKNOWN as labelled, but SGLang's scheduler header of TP10 with its exception cut names no rank here"
    ),
    "3005-gpurecipes5-a3ultra-sglang-deepseek-dp1-tp1-scheduler-exception-init-model-parallel-group-cut.log": (
        "the rank: as 3003, the scheduler exception of TP1 is cut; its DP part keeps the TP rank from being global"
    ),
    "3006-rocmatom797-mi300x-sglang-deepseek-v32-tp8-tp6-scheduler-exception-modelrunner-cut.log": (
        "the rank: as 3003, TP6's scheduler exception is cut before its error"
    ),
    "3007-vllm17631-llama33-v1-multiproc-vllmworker-rank4-workerproc-exception-profile-run-oom-title.log": (
        "UNKNOWN: the worker's exception is cut; the label takes the title (CUDA out of memory)"
    ),
    "3008-trtllm6366-gb200-disagg-wide-ep-slurm-gen-node-getcomm-allgather-unhandled-system-error-task8.log": (
        "the rank: srun's task 8 label is a task, not a rank, and the job's layout is not in the log"
    ),
    "3009-nvforum360195-b200-vllm-tp2-workerproc-failed-to-start-init-device-nccl-cuda-failure-700.log": (
        "UNKNOWN: the worker's failure to start with its NCCL error cut; the label takes the post (Cuda failure 700)"
    ),
    "3015-dynamo1405-vllm-mp-distributed-executor-load-model-traceback-cuda-oom-title.log": (
        "UNKNOWN: the load_model traceback is cut before its exception; the label takes the title (CUDA out of memory)"
    ),
    # added with logs 3201-3359 (round 24)
    "3251-deepspeed6754-gptneox-pbs-multinode-tcpstore-client-socket-timed-out-600000ms-retrying.log": (
        "NCCL_NETWORK_ERROR: a client that cannot reach the rendezvous store is read as the network's; the label "
        "takes a blog's diagnosis (the job script picked MASTER_ADDR from a sorted node list)"
    ),
    "3308-uccl-641-mi355x-ionic-ep-roce-failed-to-modify-qp-to-rtr-connection-timed-out-errno110.log": (
        "UNKNOWN: UCCL's perror 'Failed to modify QP to RTR: Connection timed out' is not in the catalog (its "
        "source was not read)"
    ),
    "3310-jadehpc-40-2018-dataparallel-8gpu-thcudacheck-error46-all-cuda-devices-busy-or-unavailable.log": (
        "CONFIG_ERROR: 'all CUDA-capable devices are busy or unavailable' is read as another process holding the "
        "GPU (exclusive compute mode); the label keeps the CUDA error"
    ),
    "3313-ipexllm-13131-two-a770-vllm-tp2-egpu-m2-dmesg-i915-gpu-hang-context-reset-ray-worker.log": (
        "UNKNOWN: Intel's i915 'GPU HANG' and context reset are not in the catalog"
    ),
    "3352-verl5659-megatron-vllm-grpo-qwen3-5-actordiederror-workerdict-0-2-10.2.4.26-then-cublaslt-invalid-handle-"
    "sigabrt-repeated-7x.log": (
        "the host: the SIGABRT's Ray worker (pid 23189) names no ip; the label takes the ip of other workers' lines"
    ),
    "3353-openrlhf1193-async-vllm016-llmrayactor-enginecore-dp0-invocation-of-collective-rpc-method-failed-traceback-"
    "cut.log": "UNKNOWN: the engine's traceback is cut before its exception; the label takes the maintainer's title",
    "3358-tinyzero30-2xa800-countdown-workerdict-nccl-version-then-raylet-worker-died-172.17.0.3-overrides-line-cut"
    ".log": (
        "UNKNOWN: Ray's 'connection error code 2' lists the OOM killer as one possible cause; the label takes the "
        "thread's title (OOM)"
    ),
    # added with logs 3401-3562 (round 25)
    "3407-icefall247-conformer-ctc-world-size4-r7n01-terminate-c10-error-cuda-illegal-memory-access-reducer-destructor"
    ".log": "the host: r7n01 is named only by the job script's '# Running on r7n01' header, which is not read",
    "3505-pytorchdistributed18-srun-n2-mp-spawn-processraisedexception-process1-store-barrier.log": (
        "PROCESS_CRASH: the spawned process's exception is cut; the label takes the title (a store-barrier timeout)"
    ),
    "3556-nccl473-docker-4x-2080ti-nccltests-g4-test-nccl-failure-common-cu777-unhandled-system-error-ipc-host.log": (
        "NCCL_INTERNAL_ERROR: nccl-tests' 'unhandled system error' names no reason; the label takes the poster's fix "
        "(docker --ipc=host)"
    ),
    "3562-pytorch152302-pt27-mp-spawn-ddp-init-process1-terminated-verify-params-nccl-oom-title-error-line-cut.log": (
        "UNKNOWN: the error line is cut from the excerpt; the label takes the title (NCCL out of memory)"
    ),
    # added with logs 3601-3759 (round 26)
    "3601-paimegatron426-qwen25-pretrain-torchrun-native-backtrace-tail-then-sigterm-to-6-workers.log": (
        "UNKNOWN: only the tail of a native backtrace (its signal line cut) and torchrun's SIGTERMs to the other "
        "workers are pasted"
    ),
    "3604-olmo737-multinode-torchrun-olmo7b-build-train-dataloader-global-indices-memmap-oserror-errno5-io-error.log": (
        "PROCESS_CRASH: 'OSError: [Errno 5] Input/output error' is read as a crash (a storage fault as likely as a "
        "setup error); the label files it as a file error"
    ),
    "3605-litllama424-redpajama-pretrain-devices4-fsdp-fabric-validate-setup-runtimeerror-prose-paste.log": (
        "PROCESS_CRASH: Lightning Fabric's RuntimeError about its setup is read as an exception; the label reads it "
        "as the program's misuse"
    ),
    "3607-megatronds202-llama2-pretrain-pipeline-engine-micro-batches-32-deepspeed-initialize-traceback-head-padded-"
    "illegal-memory-access-title.log": "UNKNOWN: the traceback is cut at its head; the label takes the title",
    "3608-llamacookbook904-leonardo-srun-fsdp-qlora-finetuning-childfailederror-root-cause-rank2-lrdn0021-then-srun-"
    "task0-exit1.log": "PROCESS_CRASH rank 2: torchrun's root cause, exit code 1; the label takes the title's "
    "AttributeError",
    "3651-kubeflowtrainer2575-katib-llm-pytorchjob-main-go-prefix-torchrun-childfailederror-sdk-version-mismatch.log": (
        "UNKNOWN: the ChildFailedError's summary is cut; the label takes the thread (an SDK version mismatch)"
    ),
    "3652-kubeflowtrainer1504-elastic-pytorchjob-worker-1-c10d-rdzv-worker-0-23456-rendezvousconnectionerror.log": (
        "NCCL_NETWORK_ERROR: a worker that cannot reach the rendezvous store is read as the network's; the label "
        "takes the thread's diagnosis (the elastic job's rendezvous settings)"
    ),
    "3654-ssit19-2025-mp-spawn-incompatible-device-warning-process-0-barrier-unhandled-cuda-error.log": (
        "PROCESS_CRASH: process 0's error is cut after its barrier frame; the label takes the title (unhandled cuda "
        "error)"
    ),
    "3655-ray40758-torchtrainer-cloud-vm-docker-raytaskerror-distbackenderror-worker-10-0-0-19-proxy-call-rank1.log": (
        "PROCESS_CRASH: the DistBackendError's message is cut; the label takes the title (a proxy call to rank 1)"
    ),
    "3661-vllm38529-2026-vgpu-ray-enginecore-raylet-worker-192-168-13-226-died-before-nccl-init-enginecore-failed-to-"
    "start.log": (
        "UNKNOWN: Ray's 'connection error code 2' names no cause; the label reads the worker's death as a crash"
    ),
    "3662-skyrl284-ray-asyncvllminferenceengine-enginecore-double-prefix-tcp-rendezvous-create-c10d-store-eaddrinuse"
    ".log": "UNKNOWN: the traceback is cut in _create_c10d_store; the label takes the title (address in use)",
    "3703-pytorch137695-vllm-tp8-8xmi300x-hipblaslt-rocblaslt-could-not-load-tensilelibrary-x4-workers-killed.log": (
        "UNKNOWN: hipBLASLt's 'Could not load TensileLibrary' is not in the catalog (the thread calls it a library "
        "bug; the message reads as a broken install)"
    ),
    "3706-oneccl123-mpirun-n2-sycl-allreduce-test-arc-a770-sycl-runtime-error-native-api-minus999-both-ranks.log": (
        "PROCESS_CRASH: SYCL's runtime_error (Intel GPUs) is read as the crash it ends in; the label counts it as "
        "the GPU runtime's error"
    ),
    "3754-trtllm1596-mixtral-8x7b-w4a16-tp4-mpirun-first-process-rank1-exit-code-1.log": (
        "PROCESS_CRASH rank 1: only mpirun's exit report is pasted; the label takes the thread's diagnosis"
    ),
    # added with logs 3801-3962 (round 27)
    "3802-pytorchexamples689-2020-imagenet-spawn-multinode-nccl-connect-refused-docker-ip.log": (
        "the host: the refused connect names its peer, the docker bridge address 172.18.0.1, as the suspect; the "
        "label names the printing host"
    ),
    "3851-hfspace-daresearch-accelerate-multigpu-childfailed-local-rank1-glued.log": (
        "the host: the Space's pod name, glued into one line with the log, is not read"
    ),
    "3853-gist-raytrain-efa-raytrainworker-died-system-error-exit-code-none.log": (
        "the host: the actor's 'ip: ...' line ends in a markdown table's ' | |', which is not removed"
    ),
    "3856-csdn-dbgpt-vllm-tp3-worker-manager-start-failed-traceback-cut.log": (
        "the host: DB-GPT's worker manager lines naming vm2255 are not read as a host"
    ),
    "3902-horovod1442-2019-mxnet-bert-mpirun-stall-inspector-stalled-rank6-allreduce-hard-wrapped.log": (
        "UNKNOWN: the stall inspector's line is wrapped inside 'remainder', and Horovod 0.18's 'Stalled ranks:' "
        "list is not read"
    ),
    "3904-pytorch123070-komondor-hpc-fsdp-cuda-oom-torchrun-childfailed-root-cause-rank0-cn01.log": (
        "PROCESS_CRASH rank 0: only torchrun's summary is pasted; the label takes the title (CUDA out of memory)"
    ),
    "3954-vllm41160-dcp-a2a-pp-broadcast-failed-collective-stack-trace-rank3-bracket-typo.log": (
        "UNKNOWN: only the watchdog's 'Stack trace of the failed collective' is pasted, not its timeout line"
    ),
    "3955-slime1106-rtx-pro-6000-sm120-ray-actor-prefix-nccl2275-cuda-failure-named-symbol-rank1.log": (
        "the rank: the Ray actor's lines name no rank (NCCL's [1] is the CUDA device)"
    ),
    "3960-sglang28396-b300-hicache-mooncake-heartbeat-monitor-tcpstore-recvvalue-reset-rank1.log": (
        "UNKNOWN: only the heartbeat monitor's lost store connection is pasted; the label takes the title"
    ),
    "3961-gpustack6019-vllm-mp-multinode-zmq-port-collision-should-dump-tcpstore-closed-glm-node01.log": (
        "NCCL_NETWORK_ERROR: the lost store connection is read as the network's; the label takes the title (a ZMQ "
        "port collision)"
    ),
    # added with logs 4001-4161 (round 28)
    "4011-qwen920-8rank-finetune-interleaved-caret-tracebacks-runtimeerror-expected-same-device-cut.log": (
        "UNKNOWN: eight ranks' tracebacks are interleaved character by character; the RuntimeError line is cut"
    ),
    "4053-codetr215-mmdet-dist-launch-oom-title-launcher-failed-exitcode1-local-rank5-glog-prefix.log": (
        "PROCESS_CRASH rank 5: only the launcher's exit report is pasted; the label takes the title (out of memory)"
    ),
    "4058-openrlhf949-32b-ppo-ray-actor-ip-prefix-watchdog-backtrace-sigabrt-title-worknccl-timeout.log": (
        "PROCESS_CRASH: the SIGABRT under the watchdog's frames is read as the crash; the timeout line itself is not "
        "in the excerpt (the label takes the title)"
    ),
    "4065-avhubert19-fairseq-hydra-multinode-torchrun-error-handler-json-rendezvoustimeouterror-wrapped.log": (
        "UNKNOWN: the error handler's JSON names 'RendezvousTimeoutError' without its module; the label reads the "
        "thread's diagnosis (configuration)"
    ),
    "4101-mambatree14-torchrun-barrier-nccl-internal-error-bootstrap-no-socket-interface.log": (
        "the rank: the 'no socket interface' line names no rank (the label's rank 0 is the world of one)"
    ),
    "4104-pytorch52916-2021-launch-2node-socket-ifname-lo-bootstrap-connect-refused-retrying-hang-gpu9.log": (
        "NCCL_NETWORK_ERROR: the refused connects are read as the network's; NCCL_SOCKET_IFNAME=lo on a two-node "
        "job (the label: a configuration error) is not joined to them"
    ),
    "4105-uccl301-h100-roce-gid-index0-ncclibrocegetversionnum-invalid-argument-check-failed-glog-abort.log": (
        "PROCESS_CRASH: UCCL's failed CHECK on its RoCE version query is read as the abort it ends in"
    ),
    "4107-insightface1444-2021-arcface-2machine-docker-bridge-broadcast-nccl-unhandled-system-error-2.4.8.log": (
        "NCCL_INTERNAL_ERROR: a bare system error; the label takes the thread's diagnosis (the docker bridge)"
    ),
    "4110-sglang3226-multinode-tp-rank10-gloo-connectfullmesh-failed-pair-cc-144-no-error.log": (
        "NCCL_NETWORK_ERROR: gloo's failed connectFullMesh is read as the network's; the label reads the thread's "
        "fix (the interface variable: configuration)"
    ),
    "4111-hipattention59-sglang-llama4-ranks4-6-gloo-connectfullmesh-failed-scheduler-init-torch-distributed.log": (
        "the rank: the gloo failures of ranks 4 and 6 are one observer cause, which names no rank"
    ),
    "4153-torchforge568-monarch-meshfailure-titantrainer1-checkpointer-save-traceback.log": (
        "UNKNOWN: Monarch's MeshFailure and its traceback's error line (cut) are not read"
    ),
    "4155-simplerl19-openrlhf-ray-critic-save-checkpoint-file-write-failed-actor-prefix.log": (
        "the host: the Ray actor's prefix names no ip; the label takes it from another of the thread's lines"
    ),
    # added with logs 4201-4352 (round 29)
    "4201-parcae1-etcd-rendezvous-keynotfound-next-strategy-rejoin-loop.log": (
        "UNKNOWN: torchelastic's etcd rendezvous retrying (EtcdKeyNotFound) is not in the catalog"
    ),
    "4202-torchelastic31-2020-k8s-etcd-rdzv-tcpstore-host-not-found-rank-minus1.log": (
        "UNKNOWN: torchelastic 0.2's 'host not found' from its TCPStore is not in the catalog"
    ),
    "4207-basilica493-etcd-rdzv-last-call-timeout-closed-participants-0-1-rendezvousclosederror.log": (
        "PROCESS_CRASH: RendezvousClosedError is read as an exception; the label reads the etcd rendezvous's "
        "settings (configuration)"
    ),
    "4208-pytorch64990-2021-g4dn-2node-c10d-worker-status-failed-json-rank1-error-handler-memoryerror-bad-alloc.log": (
        "UNKNOWN: torch 1.9's torchelastic.worker.status JSON events and the error handler's 'MemoryError: "
        "std::bad_alloc' are not read"
    ),
    "4210-mistralfinetune92-g4dn12xlarge-t4-unsupported-embed-per-head-torchrun-local-rank1-exitcode1.log": (
        "PROCESS_CRASH rank 1: torchrun's exit code 1; the label reads the thread (T4s do not support the model)"
    ),
    "4252-thunder1296-benchmark-litgpt-srun-prefix-rank0-cublas-status-alloc-failed-backward-traceback-cut.log": (
        "the rank: the unprefixed CUBLAS_STATUS_ALLOC_FAILED line is not joined to rank 0's traceback below it"
    ),
    "4255-nccl962-all-gather-object-internal-error-nccl-2181-cuda-failure-oom-calloc-proxy-service-93-setup.log": (
        "the rank: NCCL's '[Proxy Service 93] ... from rank 93' is not read as the rank of the OOM"
    ),
    "4257-llamafactory8836-gpt-oss-120b-loading-shards-47pct-glued-torchrun-sigterm-x4-cpu-ram-oom.log": (
        "UNKNOWN: torchrun's SIGTERMs while shards load name no cause; the label takes the thread (host memory)"
    ),
    "4260-vllm14726-dsv3-2node-l40-ray-tp8-pp2-raywrapper-ip-worker-base-error-mla-scaled-quantize-oom-cut.log": (
        "UNKNOWN: the worker's traceback is cut before its error; the label takes the poster's words (out of memory)"
    ),
    "4304-espnet1218-ddp-multiprocess-chainer-trainer-cuda-devices-busy-or-unavailable.log": (
        "CONFIG_ERROR: 'all CUDA-capable devices are busy or unavailable' is read as another process holding the "
        "GPU (exclusive compute mode); the label keeps the CUDA error"
    ),
    "4308-pytorch83074-ddp-checkpoint-monitored-barrier-gloo-closed-by-peer-elastic-exitcode1.log": (
        "PROCESS_CRASH rank 0: the monitored barrier's error is read as rank 0's; the label takes gloo's closed "
        "connection (the network)"
    ),
    "4309-speechbrain2588-torchrun-rdzv-endpoint-localhost-port0-client-socket-timeout-7200s.log": (
        "NCCL_NETWORK_ERROR: the store's client timing out is read as the network's; the label reads the endpoint "
        "(localhost, port 0: configuration)"
    ),
    # added with logs 4401-4512 (round 30)
    "4435-lightning-sagemaker-smddp-unsupported-reduceop-algorithmerror.log": (
        "PROCESS_CRASH: SageMaker's data-parallel library refusing a ReduceOp ('SMDDP does not support: ReduceOp') is "
        "read as the exception it raised; the label reads it as the program's misuse"
    ),
    "4438-nccl-a100-instance-mpirun-allreduce-pci-realpath-system-error.log": (
        "CONFIG_ERROR: NCCL's 'Could not find real path of /sys/class/pci_bus/...' is read as the node's /sys not "
        "showing the GPU (a container's or VM's set-up); the label files it as NCCL's internal error"
    ),
    "4452-torchtitan168-llama1b-checkpoint-save-hang-rank0-faulthandler-thread-dump-main-thread-in-scatter.log": (
        "UNKNOWN: a hang shown only by faulthandler's thread dump (the main thread in scatter); no timeout line"
    ),
    "4467-pytorch188567-nccl-symm-mem-rendezvous-window-register-invalid-argument-nccl2297.log": (
        "UNKNOWN: the NCCL error is wrapped after its source location, so 'invalid argument' starts a line of its own"
    ),
    "4482-galvatron3-global-mode-launch-traceback-childfailederror-empty-title-uncorrectable-ecc.log": (
        "UNKNOWN: only an empty ChildFailedError is pasted; the label takes the title (uncorrectable ECC)"
    ),
    "4484-raylight102-ray-2x-r9700-rccl-prefix-trailing-spaces-tqdm-glued-hw-exception-gpu-hang-sigabrt.log": (
        "the host: alberto-equipo is named only by an RCCL line cut after its prefix, not by the GPU hang's line"
    ),
    "3013-kuberay4366-ray-serve-llm-dp-vllm-servereplica-initialize-raytaskerror-runtimeerror-cut.log": (
        "PROCESS_CRASH: the Serve replica's RayTaskError(RuntimeError) (its name holds colons, read since round 30) is "
        "read as a crash of the Ray worker on its node; the RuntimeError's text is cut, and the label says UNKNOWN"
    ),
    # added with logs 4513-4576 (round 31)
    "4515-flexflowserve51-gh200-multinode-legion-error67-sigabrt-then-nccl-system-error.log": (
        "NCCL_INTERNAL_ERROR: Legion's 'LEGION ERROR' and GASNet's 'Caught a fatal signal (proc 0)' are not in the "
        "catalog; the NCCL system error printed after them is read as the cause"
    ),
    "4516-lux5-gasnet-udp-amudprun-econgestion-returned-am-node0-aborted.log": (
        "UNKNOWN: GASNet's UDP conduit (amudprun's ECONGESTION) is not in the catalog"
    ),
    "4520-relion672-refine-mpi-multinode-gpu-function-failed-at-initialise.log": (
        "UNKNOWN: RELION's 'A GPU-function failed to execute' is not in the catalog"
    ),
    "4531-torchforge493-grpo-8xh100-rdma-create-qp-not-supported-efa-actor-failure.log": (
        "UNKNOWN: Monarch's RDMA manager ('failed to create extended queue pair (QP): Operation not supported') is not "
        "in the catalog"
    ),
    "4549-awsdoeks50-lws-hostnetwork-vllm-tp16-2node-rank8-gloo-loopback-fallback-connectfullmesh-refused.log": (
        "PROCESS_CRASH: gloo's failed connectFullMesh is read as an exception; torch's loopback-fallback warning above "
        "it (also printed by one-node runs that work) is not joined to it as a configuration error"
    ),
    "4550-drivor35-k8s-ray-pytorch-8xh20-24h-container-oomkill-exit-137-diagnostic-report-quoted-bold.log": (
        "UNKNOWN: a cluster tool's markdown report ('**Restart Reason**: OOMKill') is not Kubernetes' own wording"
    ),
    "4563-axolotl1717-4x3090-70b-zero3-oom-torchrun-root-cause-rank0-host.log": (
        "PROCESS_CRASH rank 0: torchrun's root cause names no error; the label takes the title (out of memory)"
    ),
    "4567-torchtune1493-computecanada-ncclcommwatchdog-frames-then-sigterm.log": (
        "UNKNOWN: only the frames of an exception raised from ncclCommWatchdog are pasted (a timeout and an NCCL error "
        "both end there); the label takes the title (a timeout)"
    ),
    "4571-glm4-244-2x4090-lora-rank1-rich-box-ddp-forward-oom-in-title.log": (
        "UNKNOWN: the traceback is cut before its error; the label takes the title (out of memory)"
    ),
    # added with logs 4601-4664 (round 32)
    "4604-powerai141-summit-954-nodes-horovod-ddlrun-mpirun-timeout-180s-job-aborted-indented-double-spaced.log": (
        "UNKNOWN: mpirun's own launch timeout (the job aborted after 180 s) is not in the catalog; the label reads the "
        "thread's fix (a larger launcher timeout) as configuration"
    ),
    "4618-aiter548-mi300x-vllm-v0-tp4-rank0-traceback-assertionerror-nhead32-not-supported.log": (
        "PROCESS_CRASH rank 0: an AssertionError is read as a crash, as other labels have it; this label reads the "
        "assertion's meaning (a head count the kernel does not support: configuration)"
    ),
    "4620-ipexllm12081-vllm-xpu-8-arc-tp-pp-ray-ccl-error-sendmsg-fd-broken-pipe-init-device.log": (
        "UNKNOWN: oneCCL's 'CCL_ERROR ... sendmsg' (Intel GPUs) is not in the catalog"
    ),
    "4621-llmscaler595-vllm-xpu-2x-arc-pro-b70-tp2-dmesg-xe-timedout-job-not-started-gt-reset.log": (
        "UNKNOWN: the xe driver's 'Timedout job' and GT reset (Intel GPUs) are not in the catalog"
    ),
    "4638-olcf-summit-spectrum-mpi-cuda-aware-pami-cudaipcpool-error-opening-ipc-memhandle-peer1.log": (
        "UNKNOWN: Spectrum MPI's PAMI 'Error opening IPC Memhandle from peer' (Summit) is not in the catalog"
    ),
    "4659-vllm27666-dp4-ep-dbo-deepep-ht-ansi-caret-prefix-cpu-recv-timeout-interleaved.log": (
        "UNKNOWN: DeepEP's host-side 'CPU recv timeout' is not read as a cause; the label takes the pull request's "
        "title (an illegal memory access)"
    ),
    # added with logs 4701-4764 (round 33)
    "4702-pytorch42073-2020-circleci-processgroupncclerrorstest-cuda-driver-insufficient-cudanumdevices.log": (
        "CONFIG_ERROR: 'CUDA driver version is insufficient for CUDA runtime version' is read as the node's set-up "
        "(a driver older than the build); the label keeps the CUDA error"
    ),
    "4703-nccl1657-torchrun-opt-venv-tcpstore-read-callback-eof-local-rank0-exitcode1-launcher-traceback.log": (
        "PROCESS_CRASH rank 0: torchrun's root cause, exit code 1; the label takes the title (NCCL's internal error)"
    ),
    "4704-sglang20859-hicache-tp16-k8s-should-dump-flag-tcpstore-recvvalue-connection-reset-rank8-rank12.log": (
        "UNKNOWN: only the heartbeat monitor's lost store connection ('should_dump' flag) is pasted; the label takes "
        "the title (a hang)"
    ),
    "4706-pytorch76103-ctest-parallel-processgroupnccltest-bus-error-exception-rank0-nccl2165-init.log": (
        "the rank and host: ctest's bus error names no rank; the label reads rank 0 and the container's name from "
        "the test's NCCL init lines"
    ),
    "4710-transformerlens356-p3-8xlarge-4gpu-make-test-multi-gpu-assertion-n-devices-only-cuda.log": (
        "UNKNOWN: the test's assertion line is cut; the label reads the thread (a device count the test does not "
        "support: configuration)"
    ),
    "4722-wan22-s2v-8x5090-ulysses-torchrun-root-cause-rank7-oom.log": (
        "PROCESS_CRASH rank 7: only torchrun's summary is pasted; the label takes the title (out of memory)"
    ),
    "4725-roll-qwen25vl-rl-ray-actor-infer-died-host-memory-leak.log": (
        "UNKNOWN: a Ray actor's death names no cause; the label takes the maintainer's reply (a host memory leak)"
    ),
    "4728-voyager-4x4090-ulysses4-requires-xfuser-assert-timestamped.log": (
        "PROCESS_CRASH: an AssertionError is read as a crash, as other labels have it; this label reads it as a "
        "missing package (configuration)"
    ),
    "4729-wan22-ulysses8-world-size4-assertion-all-ranks.log": (
        "PROCESS_CRASH rank 0: an AssertionError is read as a crash; the label reads it as the launch's sizes "
        "(ulysses_size against the world size: configuration)"
    ),
    "4756-fairseq1608-2020-roberta-2gpu-spawn-process-0-terminated-quoted-gt-prefix.log": (
        "UNKNOWN: mp.spawn's 'process 0 terminated' is cut before 'with exit code' or 'with signal'"
    ),
    "4758-pytorch15592-torch10-two-node-gloo-ioexception-connect-127-0-1-1-refused-aborted.log": (
        "NCCL_NETWORK_ERROR: gloo's refused connect to 127.0.1.1 is read as a peer process gone; the label reads the "
        "address (the host name resolving to Debian's 127.0.1.1 on a two-node job: configuration)"
    ),
    "4759-tf44976-tf23-mirroredstrategy-2gpu-keras-fit-stuck-after-batch-all-reduce-nccl.log": (
        "UNKNOWN: a hang that prints no error and no timeout"
    ),
    "4761-chainermn218-2018-hierarchical-over-232-mpi-procs-init-comms-ncclcommunicator-traceback-cut.log": (
        "UNKNOWN: the traceback is cut before its error; the label takes the title (NCCL's error)"
    ),
    # added with logs 4801-4864 (round 34)
    "4802-cleanrl338-sebulba-ppo-jax-distributed-shutdown-disconnect-deadline-exceeded-atexit-xlaruntimeerror.log": (
        "PROCESS_CRASH: the coordination agent's DEADLINE_EXCEEDED at shutdown (atexit) is read as an exception; the "
        "label reads it as a hang"
    ),
    "4804-gpurecipes2-maxtext-a3mega-32-nodes-gke-cluster-regis"
    "tration-failed-wait-for-all-tasks-barrier-deadline-exceeded.log": (
        "CONFIG_ERROR: XLA's start-up barrier ('[Init]Wait_for_all_tasks_to_register') timing out reads as tasks "
        "that never joined, as its older wording (PjRT_Client_Connect, log 133's label); this label reads it as a hang"
    ),
    "4817-nccltests188-two-node-allreduce-socketfinalizeaccept-wrong-type-4-ne-3-hostname-user.log": (
        "NCCL_INTERNAL_ERROR: 'socketFinalizeAccept: wrong type 4 != 3' is read from its internal-error trail; the "
        "label reads another part of the thread (the nodes' transports differ: configuration)"
    ),
    "4819-nccltests324-10x-l40s-single-node-allreduce-cuda-failure-711-peer-mapping-resources-exhausted.log": (
        "the rank: NCCL's 'Cuda failure 711' names its device [0], not a rank; the label takes rank 0 of the "
        "one-process test"
    ),
    "4823-horovod610-2018-tf-horovod-warn-failed-to-open-cuda"
    "-ipc-handle-11-invalid-argument-shm-register-host-buffer.log": (
        "CONFIG_ERROR: NCCL's 'failed to open CUDA IPC handle' is read as the ranks' GPU visibility (set-up); the "
        "label keeps the CUDA error"
    ),
    "4849-ray40850-torchtrainer-3090-plus-3060-cluster-raytaskerror-runtimeerror-raytrainworker-traceback-cut.log": (
        "PROCESS_CRASH: the RayTaskError(RuntimeError) is read as the worker's crash on its node; the RuntimeError's "
        "text is cut, and the label says UNKNOWN"
    ),
    "4850-ray13953-2021-release-tune-pytorch-pbt-failure-1-raytaskerror-torchtrainable-train-buffered-ip-cut.log": (
        "PROCESS_CRASH: the RayTaskError(RuntimeError) is read as the trainable's crash on its node; the "
        "RuntimeError's text is cut, and the label says UNKNOWN"
    ),
    "4851-awssamplesray10-sagemaker-xgboost-ray-gpu-placement-group-creation-timed-out-100s-resources-line-cut.log": (
        "PROCESS_CRASH: only SageMaker's client exception is read; XGBoost-Ray's placement group timing out is not "
        "in the catalog"
    ),
    "4856-rlinf624-actor-dead-never-ran-raylet-worker-died-172.23.225.99-code-2-title-segfault-channel-line-cut.log": (
        "UNKNOWN: Ray's 'connection error code 2' names no cause; the label takes the title (a segfault)"
    ),
    "4857-vllm17770-deepseek-r1-multinode-v1-ray-engine-core-actordiederror-rayworkerwrapper-title-segfault.log": (
        "UNKNOWN: a Ray actor's death names no cause; the label takes the title (a segfault)"
    ),
    "4858-gpustack2415-ray-distributed-inference-custom-vllm-temporaryactor-no-module-named-vllm-deserialize.log": (
        "UNKNOWN: the deserialisation's 'No module named' is printed without its exception type, and the traceback "
        "is cut"
    ),
    "4834-speechbrain2868-jeanzay-torch-launch-childfailederror-override-local-rank-not-found.log": (
        "UNKNOWN: an empty ChildFailedError and its summary's header only; the label reads the thread (a launcher "
        "option the script does not take: configuration)"
    ),
    "4835-accelerate3664-multi-xpu-fsdp2-childfailederror-failures-rank1-cut.log": (
        "UNKNOWN: the ChildFailedError's failure entry is cut before its exit code"
    ),
    "4836-lightning10471-ddp-two-gpu-one-machine-stuck-after-initializing-ddp.log": (
        "UNKNOWN: a hang after DDP's initialisation that prints no error and no timeout"
    ),
    "4837-litgpt1837-fabric-slurm-two-node-srun-not-used-client-socket-127001-errno97.log": (
        "UNKNOWN: Lightning's 'srun is available but is not used' warning (printed by one-node runs that work too) "
        "and c10d's IPv6 fallback warnings are not read as a cause"
    ),
    "4840-anemoicore564-lightning-slurm-2x2-timelimit-callback-all-ranks-then-traceback-elided.log": (
        "UNKNOWN: the program's own time-limit callback and an elided traceback name no error"
    ),
    # added with logs 4901-4964 (round 35)
    "4908-vosktts18-finetune-gloo-monitoredbarrier-rank0-autograd-anomaly.log": (
        "NCCL_TIMEOUT rank 0: gloo's monitoredBarrier names rank 0 as the one that never joined; the label says "
        "UNKNOWN (the exception that stopped rank 0 is not in the excerpt)"
    ),
    "4909-diffusers10160-stableaudio-dit-4gpu-watchdog-frames-exitcode-minus6-local-rank3.log": (
        "PROCESS_CRASH rank 3: torchrun's root cause, exit code -6; the label reads the thread (the ranks' models "
        "differ: configuration)"
    ),
    "4911-wenet1376-gigaspeech-8gpu-store-based-barrier-worker-count-7-hang.log": (
        "UNKNOWN: the store barrier's progress lines within the world size (7 of 8 joined) are read as context; the "
        "label reads the missing worker as a hang"
    ),
    "4918-deepmd1774-horovodrun-rank1-ncclcomminitrank-unhandled-cuda-error.log": (
        "the rank: horovodrun's bare '[1] ' prefix is not read as a rank (it is too common a shape)"
    ),
    "4934-gritlm43-fsdp-checkpoint-save-default2-ncclcommwatchdog-frames-only.log": (
        "UNKNOWN: only the frames of an exception raised from ncclCommWatchdog are pasted (a timeout and an NCCL error "
        "both end there)"
    ),
    "4937-openclip45-2022-dataparallel-8gpu-contrastive-loss-size-mismatch.log": (
        "PROCESS_CRASH: a tensor size mismatch is read as an exception; the label reads it as the program's setup"
    ),
    "4949-dynamo419-remote-prefill-nixl-ucs-handle-error-backtrace-only.log": (
        "UNKNOWN: only UCX's backtrace under ucs_handle_error is pasted, its signal line cut"
    ),
    "4950-dynamo285-disagg-nixl-ucx-erdma-ud-qp-invalid-argument-then-signal-11.log": (
        "PROCESS_CRASH: the segfault is read; UCX's failed UD queue pair on eRDMA before it (the NIC's kind: "
        "configuration, the label) is not in the catalog"
    ),
    "4951-trtllm953-llama70b-4xh100-benchmark-nccl-warn-no-algorithm-protocol-rank3.log": (
        "CONFIG_ERROR: NCCL's 'no algorithm/protocol available' is read as the settings' (NCCL_ALGO/NCCL_PROTO); the "
        "label files it as NCCL's internal error"
    ),
    "4952-mooncake397-vllm-pd-store-multi-rdma-transfer-fail-put-then-decode-redo.log": (
        "UNKNOWN: Mooncake's transfer-engine errors (TRANSFER_FAIL) are not in the catalog"
    ),
    "4953-mooncake3299-multinode-client-dmesg-mlx5-bond-qp-local-length-error.log": (
        "UNKNOWN: the mlx5 driver's 'QP N error: local length error' kernel lines are not in the catalog (their "
        "source not read)"
    ),
    "4954-vllm10884-mooncake-te-1p1d-two-nics-slice-transport-retry-counter-exceeded.log": (
        "UNKNOWN: Mooncake's worker-pool slice failures are not in the catalog"
    ),
    "4955-sglang4880-pd-mooncake-quoted-metadata-404-segment-descriptor-not-found.log": (
        "UNKNOWN: Mooncake's metadata 404 and missing segment descriptor are not in the catalog"
    ),
    "4960-sglang27894-pd-nixl-ci-ucx-gdaki-devx-create-cq-failed-out-of-memory-nixl-err-backend.log": (
        "UNKNOWN: UCX's GDAKI devx CQ creation failure and NIXL's NIXL_ERR_BACKEND are not in the catalog"
    ),
    # added with logs 5001-5219 (round 36)
    "5001-vllm41530-dsv4-pro-tp8-cuda13-nccl2289-worker-hang-shm-broadcast-dequeue-timeouterror-padded.log": (
        "UNKNOWN: the traceback ends at vLLM's shm_broadcast 'raise TimeoutError' frame (the engine waiting "
        "on a hung worker), its exception line cut by the excerpt; frames are not read as events"
    ),
    "5002-lmcache4123-glm52-vllm-multiproc-enginecore-fatal-error-dequeue-timeout-padded.log": (
        "UNKNOWN: 'EngineCore encountered a fatal error' and a traceback cut inside shm_broadcast's dequeue: "
        "the wait on the hung worker is only in the frames (as 5001)"
    ),
    "5003-vllm48752-glm52-gb200-tp8-2nodes-heartbeatmonitor-runloop-should-dump-broken-pipe-rank5-rank4.log": (
        "UNKNOWN: only the aftermath (the heartbeat monitor's frames, 'Failed to check the should dump flag "
        "on TCPStore ... Broken pipe' as the store went away); the label takes the thread's RPC timeout"
    ),
    "5031-t5japanese1-preemptible-tpu-shutdownhook-lame-workers-heartbeatmanager-task0.log": (
        "UNKNOWN: the TPU worker's missed heartbeats (TF's ShutdownHook, lame workers) are not read; the "
        "preemption is only in the thread's title"
    ),
    "5035-levanter1127-ray-multislice-tpu-initialization-failed-open-dev-accel3-operation-not-permitted.log": (
        "PROCESS_CRASH: the TPU runtime's 'TPU initialization failed: open(/dev/accel3): Operation not "
        "permitted' (a device another process holds) is read as the XlaRuntimeError's crash; the label's "
        "class (CUDA_ERROR) also differs from the busy-GPU rule's (configuration)"
    ),
    "5036-horovod1056-tf-mpirun-rank0-lo-dgx1-004-signal-6-aborted-invalid-device-ordinal.log": (
        "PROCESS_CRASH: the log shows only Open MPI's 'exited on signal 6 (Aborted)'; the invalid device "
        "ordinal is in the thread's title"
    ),
    "5038-jax10218-tpu-pod-jax-0-3-5-local-device-count-stalls-no-server-name-in-dns-uri-channel-stack-bu"
    "ilder-failed.log": (
        "UNKNOWN: gRPC's 'no server name supplied in dns URI' / 'channel stack builder failed' (a jax release"
        " whose TPU pod coordinator address was empty) are not in the catalog"
    ),
    "5039-pytorchxla3162-mpirun-tag-output-multinode-gpu-xrt-cudnn-handle-cublas-not-initialized-gpu0-bfc-oom.log": (
        "UNKNOWN: TF's 'Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR' and 'failed to create "
        "cublas handle' (the poster reads them as memory exhausted by other processes) are not read, and the "
        "BFC allocator's W line says itself it is not a failure"
    ),
    "5042-pytorchxla3042-tpu-v3-64-one-host-invalid-system-configuration-2x4-host-topology-1-hosts.log": (
        "PROCESS_CRASH: the TPU runtime's 'Invalid system configuration: 2x4 host topology with 0 missing "
        "hosts, but 1 hosts in total' (a pod started on one host) is not in the catalog; the abort that "
        "follows is read"
    ),
    "5062-msswift9416-rlhf-vllm-server-tcpstore-connect-127.0.0.1-51216-timeout-ipv6-patch.log": (
        "NCCL_NETWORK_ERROR: a client that cannot reach the store is the network's failure, as other labels "
        "have it; this label takes the poster's fix (a version mismatch in ms-swift's IPv6 patch), which the "
        "log does not show"
    ),
    "5066-skyrl84-ref-actor-init-fsdp2-nccl-unhandled-cuda-error-cuda-failure-1-invalid-argument.log": (
        "the host: the CUDA failure is printed by the driver (skyrl_entrypoint) before the RayTaskError "
        "header that names the actor's ip, which belongs to the next error block"
    ),
    "5094-llmd675-eks-lws-wide-ep-prefill-nvshmem-detect-topo-failed-efa.log": (
        "UNKNOWN: older NVSHMEM's 'init.cu:1034: non-zero status: 28 nvshmem detect topo failed' is not in "
        "the catalog (3.4's init.cu has no such message to check it against)"
    ),
    "5152-lwa117-gpu09-dmesg-wh-cmci-storm-mce-memory-error-before-node-freeze.log": (
        "UNKNOWN: a CMCI storm and machine-check events of corrected memory errors are not a cause on their "
        "own; the node's freeze is only in the thread"
    ),
    "5154-sglang3204-tp8-a100-ecc-thread-c10-frames-fatal-python-error-aborted-no-cause.log": (
        "PROCESS_CRASH: the log shows only 'Fatal Python error: Aborted' and thread dumps; the uncorrectable "
        "ECC error is in the thread's title"
    ),
    "5155-llamafactory9170-h200x8-zero2-ecc-thread-rank1-fr-disabled-rank5-traceback-cut.log": (
        "UNKNOWN: the Flight Recorder notice and a traceback cut before its error; the ECC error is in the "
        "title and in another paste of the thread"
    ),
    # added with logs 5241-5394 (round 37)
    "5303-qwenvl349-full-finetune-torchrun-sigterm-x3-exitcode-minus6-local-rank1-cut.log": (
        "PROCESS_CRASH rank 1: only torchrun's SIGTERMs and 'failed (exitcode: -6) local_rank: 1'; the "
        "illegal memory access is in the thread's title"
    ),
    "5332-ipex810-pvc-hedp017-oneccl-atl-ofi-cant-find-suitable-provider-psm3-segfault.log": (
        "PROCESS_CRASH: oneCCL's '|CCL_ERROR| ... can't find suitable provider' (libfabric's provider for "
        "Intel GPUs not found) is not in the catalog; the segfault after it is read"
    ),
    "5333-vllmascend10591-minimax-two-node-hccl-connect-timeout-transport-init-error-rank7-to-rank15.log": (
        "UNKNOWN: HCCL's own [ERROR] lines (its connect-timeout detector, 'Transport init error! createLink "
        "para:rank[7]... remoteRank[15]') are not in the catalog"
    ),
    "5334-vllmascend1815-dsr1-dp4tp4ep16-plog-hccp-rdma-init-failed-192.168.20.148-port-down.log": (
        "UNKNOWN: HCCP's 'ra rdma init failed ... ip[192.168.20.148]' plog lines (the NPU's RoCE port down) "
        "are not in the catalog"
    ),
    "5335-lmdeploy3354-ascend-tp8-qwq32b-serving-acl-stream-synchronize-failed-507048-modelagentloop-failed.log": (
        "PROCESS_CRASH: 'ACL stream synchronize failed, error code:507048' is read as a crash; CANN's 507048 "
        "(a stream's task timing out, the label's hang) is not in the catalog"
    ),
    "5336-hccldemo44-aws-gaudi-8-device-invalid-server-type-ocp1-syndeviceacquire-error-20.log": (
        "UNKNOWN: Habana's 'Invalid server type (4[OCP1]) requested' and synDeviceAcquire's synapse error 20 "
        "are not in the catalog"
    ),
    "5337-awsneuronsdk779-ray-trainium-multinode-ddp-10.1.161.26-nrt-load-failed-non-specific-failure.log": (
        "PROCESS_CRASH: the Neuron runtime's 'nrt_load failed' under a RayTaskError(RuntimeError) is read as "
        "the Ray worker's crash; the label reads it as the device's error"
    ),
    "5339-xllm350-qwq32b-ascend-collective-service-check-failed-hccl-get-root-info-failed-glog-fatal.log": (
        "PROCESS_CRASH: xllm's glog 'Check failed: status == HCCL_SUCCESS (1 vs. 0) HCCL get root info "
        "failed' is the program's own check, not torch_npu's HCCL error; the abort after it is read"
    ),
    # added with logs 5421-5572 (round 38)
    "5455-vllm5537-compose-prefix-ray-worker-pg2-rank2-watchdog-illegal-memory-access-prefix-caching.log": (
        "the rank: '[PG 2 Rank 2]' is the rank in process group 2, not a global rank; the label takes it as "
        "global (one node, tensor parallelism only)"
    ),
    "5458-xformers1144-torchrun-2proc-seqpar-rank1-cublas-status-not-initialized-missing-set-device.log": (
        "CUDA_ERROR: cuBLAS's CUBLAS_STATUS_NOT_INITIALIZED at cublasCreate is read as a CUDA error; the "
        "label takes the poster's fix (torch.cuda.set_device missing: configuration), which the log does not "
        "show"
    ),
    "5484-paddle8876-2018-mpi-pserver-trainers-socketchannel-connection-reset-by-peer-same-peer.log": (
        "PROCESS_CRASH: Paddle 0.x's glog 'Check failed: len >= 0 peer=10.89.199.23: Connection reset by "
        "peer' is the program's own check (its abort is read), not a network message of the catalog"
    ),
    "5485-pytorch-pr129985-tcpstore-connect-recvvalue-connection-reset-by-peer-trainer-rank12.log": (
        "UNKNOWN: TCPStore's 'recvValue failed on SocketImpl(...): Connection reset by peer' is not read as a"
        " cause: most logs print it in the teardown after another failure (read as the network's, it turned "
        "3962 and four other logs wrong)"
    ),
    "5523-dsvt39-nuscenes-epoch14-after-save-latest-model-rank1-broadcast-watchdog-old-format.log": (
        "CONFIG_ERROR: '/bin/sh: gpustat: command not found' (a logging helper the program calls) is read as "
        "a command of the job's launch missing, above the watchdog timeout the job hit later"
    ),
    "5548-deepspeed3916-srun-n8-deepspeed-chat-master-port-29600-server-socket-eaddrinuse-hard-wrapped.log": (
        "PROCESS_CRASH: the store's 'failed to bind ... (errno: 98 - Address already in use)' is word-wrapped"
        " at 80 columns, which the hard-wrap reader (cuts at one exact width) does not join"
    ),
    "5572-dlrm4-dataparallel-4gpu-kaggle-killed-glued-to-progress-line.log": (
        "UNKNOWN: the shell's 'Killed' is glued to a progress line ('Killedg in train batch: ...', a carriage"
        " return lost in the paste)"
    ),
    # added with logs 5631-5751 (round 39)
    "5635-vllm2856-llama70b-awq-tp8-a10g-djl-stderr-prefix-ray-worker-unhandled-error-capture-model.log": (
        "UNKNOWN: the excerpt ends before the out-of-memory line; the label takes the poster's words (TP8 "
        "runs out of memory, TP4 works)"
    ),
    "5638-scalableagent7-impala-distributed-tf-failed-to-create-cublas-handle-not-initialized-x9.log": (
        "UNKNOWN: TensorFlow's 'failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED' "
        "(stream_executor's cuda_blas.cc) is not in the catalog (its source not read this session)"
    ),
    "5662-deepep126-2x8-h20-test-internode-nvshmem-ibrc-cq-creation-failed-ep-create-caught-signal-11-tencent64.log": (
        "PROCESS_CRASH: NVSHMEM IBRC's 'NULL value cq creation failed' and 'non-zero status: 7 ep_create "
        "failed' are not in the catalog; the segfault after them is read"
    ),
    "5668-lbann572-pascal-alexnet-caught-signal-11-sigsegv-on-rank-5-mpi-alltoall-mvapich-stack.log": (
        "the rank: LBANN's 'Caught signal 11 (SIGSEGV - invalid memory reference) on rank 5' is read as a "
        "segfault, its rank not"
    ),
    "5671-ptigpu69-mpiexec-n2-unitrace-intel-gpu-rank0-segfault-core-dumped-exit-139-rank1-signal-15.log": (
        "the rank: HPE PALS' 'hostname: rank 0 exited with code 139' is not read (its source is closed); the "
        "shell's 'Segmentation fault (core dumped)' names no rank"
    ),
    "5695-gpustack3383-sglang-diffusion-2x4090-rank1-tcpstore-recvvalue-failed-connection-closed.log": (
        "NCCL_NETWORK_ERROR: the store's 'Failed to recv, got 0 bytes' on rank 1 is read as the rendezvous "
        "store lost; the label reads the log as showing no cause (the lost store is the aftermath of another "
        "failure)"
    ),
    "5696-gpustack2501-sglang-tp2-pp2-gpu-id-3-visible-devices-0-1-tp1-pp1-scheduler-exception-cut.log": (
        "UNKNOWN: the scheduler's exception is cut; the label reads the GPU ids beyond CUDA_VISIBLE_DEVICES "
        "from the log's arguments and the title"
    ),
    "5697-sglang22511-glm5-2xh100-pd-decode-dp15-tp15-scheduler-exception-mlp-sync-batch-cut.log": (
        "the rank: UNKNOWN as labelled, but SGLang's scheduler header of DP15 TP15 with its exception cut "
        "names no rank here (as 3003)"
    ),
    "5723-alpa701-two-nodes-profileworker-ip-192-168-0-10-xlaruntimeerror-failed-to-start-rpc-server.log": (
        "PROCESS_CRASH: XLA's 'Failed to start RPC server' is read as the worker's crash; the cause the label"
        " takes ('Cannot assign requested address') was cut by the excerpt"
    ),
    "5725-ttrl12-8xl40s-raytaskerror-workerdict-generate-sequences-ip-10-141-3-2-vllm-sampler-caret-lines.log": (
        "PROCESS_CRASH: the RayTaskError(RuntimeError)'s error line is not in the excerpt; the label takes "
        "the CUDA error from the title"
    ),
    "5726-ray54619-train-v2-head-node-gpus-traincontroller-world-ranks-raytrainworker-rank1-error-in-trai"
    "ning-function-check-capability.log": (
        "UNKNOWN: the exception line is not in the saved part; the label takes the pull request's words (a "
        "head node with GPUs)"
    ),
    "5727-ray21863-release-test-ray-lightning-unhandled-error-rayexecutor-ip-172-31-54-127-ddp-verify-mod"
    "el-pipe-prefix.log": (
        "UNKNOWN: the error text is not in the saved lines; the label takes the thread's title (an NCCL "
        "invalid usage)"
    ),
    "5601-nccl1240-single-a100-vm-nccl-graph-file-xml-import-channel-dev1-not-found.log": (
        "NCCL_TRANSPORT_FALLBACK: NCCL's graph-file import failing ('channel dev 1 not found', "
        "NCCL_GRAPH_FILE set wrongly) is not in the catalog; the socket transport's INFO line is read"
    ),
    "5604-nccl1499-torchrun-4gpu-uftrace-wrapper-error-code-1-nccl-info-only-internal-check-failed-title.log": (
        "NCCL_TRANSPORT_FALLBACK: the log holds NCCL INFO lines only; the internal check failure is in the "
        "thread's title"
    ),
    # added with logs 5781-6392 (rounds 40 and 41)
    "5781-vllm7074-two-node-tp16-rank9-gloo-loopback-fallback-rank8-connectfullmesh-failed-10.41.0.8.log": (
        "NCCL_NETWORK_ERROR: gloo's connectFullMesh failure is read as a lost connection; the label takes the"
        " thread's diagnosis (rank 9 fell back to the loopback address: the interface setting) and its rank 8"
    ),
    "5811-pytorch116974-slurm-2node-torchrun-rendezvousclosederror-srun-tasks-exit-step-cancelled.log": (
        "PROCESS_CRASH: torch elastic's bare RendezvousClosedError is read as the agent's crash; the label "
        "reads two agents per node as the launch's set-up, which the log does not say"
    ),
    "5845-opennmttf985-horovod-tag-output-shut-down-after-rank-finished-early-stopping.log": (
        "UNKNOWN: Horovod's 'Horovod has been shut down ... after one of the ranks finished execution' is not"
        " in the catalog (its two readings, a rank's exception or an early finish, need the thread)"
    ),
    "5848-relion327-refine3d-gpu-rank1-mpi-err-truncate-relionerror-sigabrt-bc-gpu1.log": (
        "the rank: RELION's own '  1: ' MPI-rank prefix is not read"
    ),
    "5849-relion351-refine3d-5mpi-4gpu-cuda-projector-unknown-error-code30-after-gpu-memory-warning.log": (
        "PROCESS_CRASH: RELION's own 'ERROR: unknown error in ...cuda_projector.cu at line 115 (error-code "
        "30)' is not in the catalog; the signal below it is read"
    ),
    "5877-paddle71667-single-node-multicard-squared-l2-norm-cuda-error-700-illegal-address.log": (
        "CUDA_ERROR: the illegal memory access is read as the CUDA error the log shows; the label takes the "
        "poster's finding (tensors on two GPUs: the program)"
    ),
    "5931-marin1534-tpu-multislice-v4-64-accel-fatal-error-interrupt-tpu1013.log": (
        "UNKNOWN: the TPU runtime's '!!!! FATAL ERROR !!!!' and error interrupt lines are not in the catalog "
        "(TPU hardware is out of its scope so far)"
    ),
    "5932-pytorchxla7138-tpu-v5e-litepod16-fsdpv2-device-halted-prematurely-fatal.log": (
        "UNKNOWN: torch_xla's 'Accelerator device halted prematurely' on a TPU is not in the catalog"
    ),
    "5938-tfmodels9109-mwms-two-machines-unavailable-socket-closed-collectivebcastrecv.log": (
        "PROCESS_CRASH: TensorFlow's UnavailableError 'Socket closed' (gRPC status 14) is read as the "
        "worker's exception; the label reads it as the network between the workers"
    ),
    "5965-pytorch23534-aws-32rank-imagenet-rank4-ring-then-shm-h42-cuda-failure-invalid-argument-trailing"
    "-spaces.log": (
        "the rank: NCCL 2.4's 'Ring 00 : 4[0] -> 5[1]' connection lines give the printing process's rank only"
        " within its communicator, which is not read as a global rank"
    ),
    "5966-horovod893-2node-ib-heinzel135-rank2-shm-h42-cuda-failure-invalid-argument-init-chain-minus1.log": (
        "the rank: as 5965, the rank is only in NCCL's ring connection lines of the printing pid"
    ),
    "6001-distributedtutorial3-mp-spawn-multinode-env-rendezvous-tcpstore-connection-timed-out.log": (
        "PROCESS_CRASH: a bare 'RuntimeError: Connection timed out' is read as the process's exception; the "
        "label reads it as the env:// store unreachable"
    ),
    "6004-verl2550-ray-workerdict-ipv6-bracketed-master-addr-gai-error-hang-in-create-c10d-store.log": (
        "UNKNOWN: the getaddrinfo error of a bracketed IPv6 MASTER_ADDR is not in the catalog in this wording"
    ),
    "6006-msswift6368-dlc-multinode-grpo-nslookup-master-0-name-does-not-resolve-torchrun-traceback.log": (
        "UNKNOWN: the init container's 'nslookup: can't resolve ... Name does not resolve' / 'waiting for "
        "master' is not read as a cause (it is also printed while the master pod starts normally)"
    ),
    "6027-metaicl8-torch-distributed-run-8proc-child-process-failed-no-error-file-local-rank0-exitcode1.log": (
        "UNKNOWN: torch 1.9's 'CHILD PROCESS FAILED WITH NO ERROR_FILE' / 'Child process N (local_rank 0) "
        "FAILED (exitcode 1)' is not in the catalog"
    ),
    "6028-mmpretrain771-mmcls-torch-launch-childfailederror-failures-rank1-exitcode2-node001-cut.log": (
        "CONFIG_ERROR: exit code 2 in the ChildFailedError summary is read as argparse's usage error; the "
        "label reads the excerpt (cut before the root cause) as showing none"
    ),
    "6051-deepep223-two-node-nvshmem-bootstrap-recv-broken-pipe-allgather-ipc-failed.log": (
        "CONFIG_ERROR: NVSHMEM's bootstrap 'Message truncated' (a collective mismatch) is read above its "
        "earlier 'Broken pipe'; the label reads the broken pipe as the network's"
    ),
    "6084-gromacs5078-dardel-acpp-hipsycl-hipmemsetasync-failed-srun-nid002892-task39-aborted-step-cancelled.log": (
        "PROCESS_CRASH: AdaptiveCpp's '[hipSYCL Error] ... hipMemsetAsync() failed (error code = HIP:1)' is "
        "not in the catalog; the abort is read"
    ),
    "6086-milabench336-rocm624-llm-full-mp-gpus-hang-hard-wrapped-unable-to-shutdown-sigint-sigkill-five-"
    "workers.log": (
        "UNKNOWN: the log shows only workers force-killed after ignoring SIGINT; the label takes the thread's"
        " word (a hang)"
    ),
    "6149-cachedit353-wan-ulysses-torchrun8-rank4-runtimeerror-size-of-tensor-a-2535-must-match-20280.log": (
        "PROCESS_CRASH: a shape error in the program is read as the rank's crash; the label reads it as the "
        "parallel setting's (CONFIG_ERROR)"
    ),
    "6150-ringflashattn44-torchrun4-varlen-test-ranks1-0-2-indexerror-too-many-indices-missing-bracket.log": (
        "PROCESS_CRASH: an IndexError every rank raises is read as a crash (rank 1 first); the label reads it"
        " as the test's set-up with no rank"
    ),
    "6172-aibrix1433-vllm-1p1d-decode-pod-nixl-ucx-mlx5-7-umr-qp-rtr-no-such-device-enginecore-failed.log": (
        "UNKNOWN: UCX's UMR QP 'No such device' under NIXL is not in the catalog in this wording"
    ),
    "6173-byteps313-rdma-server-quoted-ps-lite-ibv-reg-mr-cannot-allocate-memory-wrapped.log": (
        "PROCESS_CRASH: ps-lite's own 'ibv_reg_mr' check failure is not in the catalog; the abort is read"
    ),
    "6174-byteps372-2x8gpu-resnet50-worker-rdma-transport-ibv-post-send-failed.log": (
        "PROCESS_CRASH: ps-lite's 'ibv_post_send failed' check is not in the catalog; the abort is read"
    ),
    "6175-nccl1219-nccltests-collnet-sharp-collect-ports-data-mlx5-0-port-used-by-sm-c25l19.log": (
        "UNKNOWN: SHARP's 'port used by SM' collect-ports error is not in the catalog"
    ),
    "6176-uccl974-p2p-benchmark-num-iovs-128-cqe-remote-access-error-chi-mi325x-pod2-098.log": (
        "UNKNOWN: UCCL's CQE 'remote access error' lines are not in the catalog"
    ),
    "6203-bevformerseg18-eval-progress-glued-exitcode-minus9-local-rank-wrapped.log": (
        "UNKNOWN: the launcher's exit code -9 is glued to a progress line and its local rank hard-wrapped; "
        "neither is read"
    ),
    "6205-mmdet1767-slurm-dist-spawn-unpickle-memoryerror-lines-joined.log": (
        "UNKNOWN: the MemoryError is glued to the previous line ('...load(from_parent)MemoryError')"
    ),
    "6206-openpcdet1310-waymo-4gpu-launch-killing-subprocess-x4-right-truncated.log": (
        "OOM_HOST: torch.distributed.launch's 'Killing subprocess' lines are read as the launcher's SIGKILL "
        "of its children after one ended; the label reads the log as showing no cause"
    ),
    "6231-nccltests143-16xa100-one-node-all-reduce-perf-bus-error-core-dumped.log": (
        "the host: the shell prompt's host (root@nccl-cuda118) is not read as the host of the bus error below"
        " it"
    ),
    "6233-pytorch173679-inductor-rank9-rank13-triton-cache-cuda-utils-stale-file-handle-nfs.log": (
        "PROCESS_CRASH: an ImportError of a Triton cache file on NFS ('Stale file handle') is read as rank "
        "9's crash; the label reads the shared cache directory as the set-up"
    ),
    "6235-msswift6695-multinode-rank1-datasets-chmod-indices-cache-oserror-116-stale-file-handle.log": (
        "PROCESS_CRASH: 'OSError: [Errno 116] Stale file handle' is read as the rank's crash; the label reads"
        " the shared cache directory as the set-up"
    ),
    "6261-chitu56-8xh200-torchrun-no-kernel-image-root-cause-rank4-shadecloud.log": (
        "PROCESS_CRASH: only torchrun's summary is in the excerpt; the label takes the CUDA error from the "
        "title"
    ),
    "6262-chitu36-a800-deepseek-r1-interleaved-ranks-no-kernel-image-silu-fused-moe.log": (
        "CONFIG_ERROR: 'no kernel image is available for execution on the device' is read as the build's (a "
        "binary without this GPU's architecture); the label reads it as a CUDA error"
    ),
    "6291-nccl1709-sharp-collnet-rank238-no-algorithm-protocol-allgather-int8.log": (
        "CONFIG_ERROR: NCCL's 'no algorithm/protocol available' is read as a configuration error "
        "(NCCL_ALGO/PROTO or CollNet settings); the label reads it as NCCL's internal error"
    ),
    "6296-pytorch130414-torchrun-2gpu-nccl2-12-barrier-invalid-resource-handle-rank1.log": (
        "CUDA_ERROR: 'invalid resource handle' is read as the CUDA error it is; the label takes the thread's "
        "finding (an NCCL build torch does not support)"
    ),
    "6351-vllmascend1443-qwen32b-tp8-pp3-train-pid-npu-synchronize-507048-rankid8-task-timeout.log": (
        "PROCESS_CRASH: torch_npu's 'NPU function error: AclrtSynchronizeDevice ... 507048' task timeout is "
        "not in the catalog"
    ),
    "6352-awsneuronsdk851-flan-t5-tp8-parallel-trace-bootstrapinit-timeout-waiting-for-rx-rank0-1-of-8.log": (
        "UNKNOWN: the Neuron runtime's bootstrap 'Timeout waiting for RX' is not in the catalog"
    ),
    "6353-optimumneuron761-trn1-32xl-sft-16-procs-enc-init-comm-global-comm-less-channels-than-replica-gr"
    "oup-assertion.log": (
        "PROCESS_CRASH: the Neuron runtime's assertion is read as a crash; the label takes the thread's "
        "reading (more processes than its channels allow)"
    ),
    "6355-vllmascend2754-dsv31-w8a8-tp-workers-ei0007-failed-to-allocate-resource-qp-memory-exhausted-tra"
    "nsport-init.log": (
        "UNKNOWN: HCCL's EI0007 'Failed to allocate resource' is not in the catalog"
    ),
    "6381-diffsynth1272-accelerate-deepspeed-free-corrupted-unsorted-chunks-local-rank0-exitcode-minus6.log": (
        "the host: the only host is on NCCL's INFO lines; an unprefixed failure of a one-node log is not "
        "given it"
    ),
    "6383-falcon12-ddppo-end-of-training-rank2-tcpstore-should-dump-recv-0-bytes-malloc-consolidate-unali"
    "gned-fastbin.log": (
        "UNKNOWN: glibc's 'malloc_consolidate(): unaligned fastbin chunk detected' is not in the catalog"
    ),
    "6387-torchcomms410-two-ranks-pluggable-allocator-attributeerror-ncclx-not-finalized-terminate-sigabr"
    "t-stack.log": (
        "PROCESS_CRASH: the abort is read; the label reads the API mismatch every rank hits as the set-up"
    ),
    "6391-mlcommons-training770-llama2-70b-lora-8xh100-nccl-service-thread-connection-closed-local-rank5-"
    "exitcode-minus6.log": (
        "the host: as 6381, the only host is on NCCL's INFO lines"
    ),
    "6392-flowgrpo161-qwenimage-grpo-ncclcommwatchdog-exception-frames-fatal-python-error-aborted-thread-dump.log": (
        "PROCESS_CRASH: the excerpt holds the watchdog's exception frames and the abort, not its message; the"
        " label takes the timeout from another block of the thread"
    ),
    "3311-deepep-17-h20-roce-test-low-latency-nvshmem-ibgda-init2rtr-syndrome-29e0df-connect-eps-failed.log": (
        "the host: the IBGDA queue pair's refusal is read as the set-up, as labelled; its host is only the "
        "shell prompt's (root@HOST), which is not read"
    ),
    # added with logs 6411-6626 (round 42)
    "6411-nccl1176-p4de-srun-nccl2193-bootstrap-message-truncated-256-instead-of-4-internal-error.log": (
        "CONFIG_ERROR: NCCL's bootstrap 'Message truncated' is read as ranks disagreeing on a collective; the"
        " label takes the thread's finding (an intermittent NCCL 2.19 bug gone on 2.18)"
    ),
    "6412-nccl1808-worker-9-socketfinalizeaccept-wrong-magic-http-get-proxy-service-hang-rank80.log": (
        "UNKNOWN: NCCL's 'socketFinalizeAccept: wrong magic' (an HTTP request reaching NCCL's port) is not "
        "read as a cause; the hang is in the thread's title"
    ),
    "6414-deepep41-test-intranode-proxy-service-accept-failed-eagain-close-from-rank0-retcode3.log": (
        "NCCL_NETWORK_ERROR: the proxy service's 'accept failed: Resource temporarily unavailable' at "
        "teardown is read as a lost connection; the label reads it as NCCL's internal error"
    ),
    "6441-raylightning32-ray-tune-workers-misconfiguration-gpus-machine-only-has-0.log": (
        "UNKNOWN: the MisconfigurationException's message line is cut from the excerpt (only its header and "
        "Ray's lines remain)"
    ),
    "6446-rvt18-lightning-2gpu-store-based-barrier-world2-worker-count1-error-executing-job.log": (
        "UNKNOWN: only torch's 'Waiting in store based barrier' INFO line is shown, not its timeout; the "
        "label takes the hang from the thread"
    ),
    "6448-lingua58-slurm-8-nodes-rank30-dp-rank-indexerror-list-index-out-of-range.log": (
        "PROCESS_CRASH: an IndexError in the program's rank arithmetic is read as rank 30's crash; the label "
        "reads it as the set-up"
    ),
    "6449-sparsify45-multinode-parallel-get-stream-indexerror-device-ids.log": (
        "PROCESS_CRASH: an IndexError is read as a crash; the label takes the poster's 'my mistake' (the set-"
        "up)"
    ),
    "6471-diffusers9727-flux-deepspeed-2xl40s-some-nccl-ops-failed-backward-traceback.log": (
        "UNKNOWN: torch 1.x's 'Some NCCL operations have failed or timed out' is not in the catalog (its "
        "source could not be read this session)"
    ),
    "6472-deepspeed1834-mpirun-rank19-nccl-communicator-aborted-rank60-traceback.log": (
        "UNKNOWN: the bare 'NCCL communicator was aborted on rank 19.' names no reason; the label takes the "
        "timeout from the title"
    ),
    "6502-nccl782-torch-barrier-gdb-bt-segfault-ncclproxyservice-ncclibderegmr.log": (
        "UNKNOWN: a bare gdb backtrace with no signal line; the segfault is in the title"
    ),
    "6504-pytorch94393-ddp-nsys-gdb-bt-null-call-nsys-dlvsym-ncclibinit-ibvwrap.log": (
        "UNKNOWN: a bare gdb backtrace with no signal line; the segfault is in the title"
    ),
    "6505-nccl11-2016-broadcast-test-6-comms-2-gpus-segfault-in-comminitall.log": (
        "UNKNOWN: NCCL 2016's segfault shows no signal line the catalog reads"
    ),
    "6507-sglang5013-a100-tp8-service-thread-connection-closed-by-localrank7-segfault.log": (
        "UNKNOWN: only NCCL's '[Service thread] Connection closed by localRank 7' INFO lines; the crash is in"
        " the title"
    ),
    "6531-trixie9-slurm-lightning-cuda-check-driver-nvidia-driver-too-old-found-10010.log": (
        "CONFIG_ERROR: 'The NVIDIA driver on your system is too old' is read as the set-up (a driver older "
        "than the CUDA build); the label reads it as a CUDA error"
    ),
    "6532-cuml5961-dask-cuda-2xa10-nccl-warn-cuda-driver-version-insufficient-vm-192-150-centos.log": (
        "CONFIG_ERROR: 'CUDA driver version is insufficient for CUDA runtime version' is read as the set-up; "
        "the label reads it as a CUDA error"
    ),
    "6533-lmdeploy1108-turbomind-nccl-warn-cuda-driver-insufficient-unhandled-cuda-error-illegal-instruction.log": (
        "CONFIG_ERROR: as 6532"
    ),
    "6534-translations1167-taskcluster-train-nvml-driver-library-version-mismatch-no-gpus-ex-tempfail.log": (
        "CONFIG_ERROR: NVML's 'Driver/library version mismatch' is read as the node's set-up, as NCCL's "
        "nvmlInit row; the label reads it as a CUDA error"
    ),
    "6535-tfos108-spark-executor1-nvml-driver-library-mismatch-failed-to-allocate-gpu.log": (
        "CONFIG_ERROR: as 6534"
    ),
    "6536-shinecluster30-slurm-node-eureka-nvidia-smi-nvml-driver-library-mismatch-squeue.log": (
        "CONFIG_ERROR and the host: as 6534, and the node (eureka) is named only by squeue's output"
    ),
    "6537-dmlcloud58-lustre-pipeline-callback-pynvml-get-handle-nvmlerror-unknown.log": (
        "UNKNOWN: pynvml's NVMLError_Unknown from a callback is not in the catalog"
    ),
    "6538-pytorch184277-dgxb200-runner-docker-gpus-all-failed-to-initialize-nvml-unknown-error.log": (
        "UNKNOWN: 'Failed to initialize NVML: Unknown Error' in a container is not in the catalog"
    ),
    "6540-openrlhf233-ppo-llmrayactor-vllm-tp-gt1-no-supported-device-detected.log": (
        "PROCESS_CRASH: vLLM's 'No supported device detected' is read as the actor's crash; the label reads "
        "it as the set-up"
    ),
    "6541-vllm7013-ray-data-mapworker-init-device-error-set-device-ip-10-169-4-72-cut.log": (
        "UNKNOWN: the excerpt is cut before the set_device error"
    ),
    "6542-vllm14415-kuberay-serve-replica-vllm072-initialize-runtimeerror-traceback-cut.log": (
        "PROCESS_CRASH: the replica's traceback is cut; the label takes the configuration error from the "
        "thread"
    ),
    "6570-sa2va138-xtuner-deepspeed-resume-pth-rank1-assertionerror-then-rank0-resume-traceback-cut.log": (
        "PROCESS_CRASH: a bare AssertionError in xtuner's resume is read as rank 1's crash; the label reads "
        "it as the set-up"
    ),
    "6596-areal232-sglang-pp2-llm-server-jobexception-completed-local-scheduler.log": (
        "PROCESS_CRASH: AReaL's scheduler JobException (a job COMPLETED early) is read as a crash; the label "
        "reads the excerpt as showing no cause"
    ),
    "6623-pytorch163397-mp-spawn-destroy-process-group-terminating-3-sigterm-processraisedexception-cut.log": (
        "PROCESS_CRASH: the spawn wrapper's exception is read; the CUDA error is only in the thread's title"
    ),
}


def _same_host(label: str, node: str) -> bool:
    a, b = label.lower(), node.lower()
    return a == b or b.startswith((a + ".", a + "-ib"))


def _right(name: str) -> tuple[bool, str]:
    label = LABELS[name]
    causes = run_postmortem([LogFiles([WILD / name])]).causes
    c = causes[0] if causes else None
    code, rank, nodes = (c.code.value, c.rank, c.nodes) if c else ("UNKNOWN", None, [])
    ok = code == label["class"]
    ok &= label.get("rank") is None or rank == label["rank"]
    ok &= label.get("host") is None or any(_same_host(str(label["host"]), n) for n in nodes)
    return (
        ok,
        f"{code} rank={rank} nodes={nodes} (label {label['class']} rank={label.get('rank')} host={label.get('host')})",
    )


@pytest.mark.parametrize("name", sorted(LABELS))
def test_wild_log(name: str) -> None:
    ok, said = _right(name)
    if name in KNOWN_MISSES:
        assert not ok, f"{name} is now right: take it out of KNOWN_MISSES ({said})"
    else:
        assert ok, said


def test_every_label_has_its_log() -> None:
    assert sorted(LABELS) == sorted(p.name for p in WILD.glob("*.log"))
    assert set(KNOWN_MISSES) <= set(LABELS)
