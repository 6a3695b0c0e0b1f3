import socket, sys, time, subprocess
port=int(sys.argv[1]); mode=sys.argv[2]; pid=sys.argv[3]
def rss(): return [l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]
print("rss before", rss())
socks=[]
for i in range(1000):
    s=socket.create_connection(("127.0.0.1",port))
    s.sendall(b"CONNECT api.example.test:8443 HTTP/1.1\r\nHost: api.example.test:8443\r\n\r\n")
    r=s.recv(1000)
    if mode=="half": s.shutdown(socket.SHUT_WR); socks.append(s)
    else: s.close()
time.sleep(1)
out=subprocess.run(["ss","-tanH","state","close-wait","sport","=",f":{port}"],capture_output=True,text=True).stdout
print(mode, "close-wait on broker side:", len(out.splitlines()), "rss", rss(), "fds", len(__import__('os').listdir(f'/proc/{pid}/fd')))
