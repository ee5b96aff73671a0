import { describeMatrix, usePortal } from "./harness.js";
import { servicesArea } from "./services.matrix.js";

// The security matrix of hosted feature services (services.matrix.ts): layers, features,
// attachments and definitions, on a portal of its own.
usePortal(servicesArea);
describeMatrix(servicesArea);
