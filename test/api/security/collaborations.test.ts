import { collaborationsArea } from "./collaborations.matrix.js";
import { describeMatrix, usePortal } from "./harness.js";

// The security matrix of distributed collaboration (collaborations.matrix.ts), on a portal of its
// own that collaborates with a peer portal on loopback.
usePortal(collaborationsArea);
describeMatrix(collaborationsArea);
