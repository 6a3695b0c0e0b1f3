// A TLS front for a plain-HTTP server in the tests (the MCP reference server, which serves plain
// HTTP only): terminates TLS with the test CA's leaf and pipes each connection to
// 127.0.0.1:TARGET, byte for byte. Prints `READY {"port": N}` once it listens.
//   node tls_front.mjs CERT.pem KEY.pem TARGET_PORT
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';

const [cert, key, target] = process.argv.slice(2);
if (!cert || !key || !target) {
  process.stderr.write('usage: node tls_front.mjs CERT.pem KEY.pem TARGET_PORT\n');
  process.exit(1);
}
const server = tls.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) },
                                (client) => {
  const upstream = net.connect(Number(target), '127.0.0.1');
  const end = () => { client.destroy(); upstream.destroy(); };
  client.pipe(upstream);
  upstream.pipe(client);
  for (const s of [client, upstream]) {
    s.on('error', end);
    s.on('close', end);
  }
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`READY ${JSON.stringify({ port: server.address().port })}\n`);
});
