#!/usr/bin/env python3
"""Prints one broker's GET_BROKER_RUNTIME_INFO (code 28) table as JSON: a tiny raw
RocketMQ remoting client (JSON header), for scripts that sample broker state.

    scripts/runtime-info.py HOST:PORT [KEY ...]    # whole table, or the named keys
"""
import json
import socket
import struct
import sys


def call(addr, code, opaque=1, timeout=5.0):
    host, port = addr.rsplit(":", 1)
    header = json.dumps({"code": code, "language": "RUST", "version": 0, "opaque": opaque, "flag": 0, "extFields": {}}).encode()
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(frame)
        head = b""
        while len(head) < 4:
            chunk = s.recv(4 - len(head))
            if not chunk:
                raise ConnectionError("closed")
            head += chunk
        (length,) = struct.unpack(">i", head)
        rest = b""
        while len(rest) < length:
            chunk = s.recv(length - len(rest))
            if not chunk:
                raise ConnectionError("closed")
            rest += chunk
    (mark,) = struct.unpack(">i", rest[:4])
    header_len = mark & 0xFFFFFF
    return json.loads(rest[4 : 4 + header_len]), rest[4 + header_len :]


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    header, body = call(sys.argv[1], 28)
    if header.get("code") != 0:
        print(f"runtime info failed: {header}", file=sys.stderr)
        sys.exit(1)
    table = json.loads(body)["table"]
    keys = sys.argv[2:]
    print(json.dumps({k: table.get(k) for k in keys} if keys else table))


if __name__ == "__main__":
    main()
