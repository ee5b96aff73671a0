import { fuzzArea } from "./harness.js";

// The API roots, sign-in, the organization with its roles and webhooks, portaladmin.
fuzzArea("portal");
