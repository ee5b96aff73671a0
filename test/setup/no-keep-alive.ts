import { Agent, setGlobalDispatcher } from "undici";

/**
 * Test files run portals in their own process and sometimes block its event loop for seconds
 * (thousands of rows written in one SQLite transaction). Meanwhile the fetch client's pooled
 * keep-alive connections and the server's idle timers both expire, and the next request may go
 * out on a connection the server closes at that very moment: "fetch failed: other side closed"
 * (seen twice in CI, in test/process/limits.test.ts and test/api/search-limits.test.ts). That race belongs to
 * keep-alive itself, not to the code under test, so the tests' fetch opens a connection per
 * request (`pipelining: 0` turns keep-alive off); on loopback this costs a fraction of a
 * millisecond. The server's own keep-alive is unchanged and tested as it is.
 */
setGlobalDispatcher(new Agent({ pipelining: 0 }));
