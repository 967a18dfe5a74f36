# The C++ side of broker/tests/interop_acl_clients.rs: one run of Apache
# rocketmq-client-cpp (the librocketmq.so that the pinned rocketmq-client-python wheel
# ships, driven through its ctypes binding), signing every request with
# `SessionCredentials` (set_session_credentials: AccessKey, SecretKey, OnsChannel),
# pointed at a RingMQ NameServer. It prints one line `RESULT {json}` on stdout for the
# Rust test to check. The C++ client logs to $HOME/logs/rocketmq-cpp/ (the test gives it
# a HOME of its own and reads the broker's answers there).
#
# Environment: NAMESRV (host:port), ACCESS_KEY, SECRET_KEY, TOPIC, GROUP (the producer
# and consumer group suffix), COUNT (messages, pubsub only), DEADLINE_MS (the run's
# bound: past it the script prints what it has and exits 2).
#
# Modes (argv[1]):
#   pubsub: a producer sends COUNT messages `cpp-<i>` with send_sync, then a clustering
#           push consumer of a fresh group reads the topic until it has every body sent.
#           RESULT {sent: [{body, msgId, status}], received: [body]}.
#   refused: one send_sync, which the broker must refuse. RESULT {sendError} or {sent}.
import json
import os
import sys
import threading

from rocketmq.client import ConsumeStatus, Message, Producer, PushConsumer

NAMESRV = os.environ['NAMESRV']
ACCESS_KEY = os.environ['ACCESS_KEY']
SECRET_KEY = os.environ['SECRET_KEY']
TOPIC = os.environ['TOPIC']
GROUP = os.environ['GROUP']
DEADLINE_S = int(os.environ['DEADLINE_MS']) / 1000.0
# The C++ client's default `SessionCredentials` channel.
CHANNEL = 'ALIYUN'

progress = {}
lock = threading.Lock()


def result(value, code=0):
    sys.stdout.write('RESULT %s\n' % json.dumps(value))
    sys.stdout.flush()
    # The C++ client's threads must not keep the process (or a hung shutdown) alive.
    os._exit(code)


def timed_out():
    with lock:
        out = dict(progress, timedOut=True)
    result(out, 2)


def producer():
    p = Producer('PG-' + GROUP)
    p.set_namesrv_addr(NAMESRV)
    p.set_session_credentials(ACCESS_KEY, SECRET_KEY, CHANNEL)
    p.start()
    return p


def message(body):
    m = Message(TOPIC)
    m.set_tags('TagA')
    m.set_body(body)
    return m


def pubsub():
    count = int(os.environ['COUNT'])
    p = producer()
    sent = progress['sent'] = []
    for i in range(count):
        body = 'cpp-%d' % i
        r = p.send_sync(message(body))
        if int(r.status) != 0:
            raise RuntimeError('send %d: status %s' % (i, r.status))
        sent.append({'body': body, 'msgId': r.msg_id, 'status': int(r.status)})
    p.shutdown()

    received = progress['received'] = []
    want = set(s['body'] for s in sent)
    done = threading.Event()

    def on_message(msg):
        with lock:
            received.append(msg.body.decode('utf-8'))
            if want <= set(received):
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer('CG-' + GROUP)
    c.set_namesrv_addr(NAMESRV)
    c.set_session_credentials(ACCESS_KEY, SECRET_KEY, CHANNEL)
    c.subscribe(TOPIC, on_message)
    c.start()
    done.wait()
    c.shutdown()
    with lock:
        result({'sent': sent, 'received': list(received)})


def refused():
    p = producer()
    out = {}
    try:
        r = p.send_sync(message('must-be-refused'))
        out['sent'] = {'msgId': r.msg_id, 'status': int(r.status)}
    except Exception as e:  # the binding raises ProducerSendSyncFailed
        out['sendError'] = '%s: %s' % (type(e).__name__, e)
    p.shutdown()
    result(out)


if __name__ == '__main__':
    timer = threading.Timer(DEADLINE_S, timed_out)
    timer.daemon = True
    timer.start()
    run = {'pubsub': pubsub, 'refused': refused}.get(sys.argv[1])
    if run is None:
        raise SystemExit('unknown mode %r' % sys.argv[1])
    try:
        run()
    except Exception as e:
        with lock:
            out = dict(progress, error='%s: %s' % (type(e).__name__, e))
        result(out, 1)
