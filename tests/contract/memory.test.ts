import { ApprovalStore } from "@tool-gate/core"
import { toolGateSuite } from "./toolGateSuite.js"

toolGateSuite("memory", () => ApprovalStore.layerMemory)
