import { fuzzArea } from "./harness.js";

// Collaborations, workspaces, invitations and syncs, and the peer endpoint between portals.
fuzzArea("collaborations");
