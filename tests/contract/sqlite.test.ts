import { sqliteStore } from "../support/sqlStores.js"
import { toolGateSuite } from "./toolGateSuite.js"

toolGateSuite("sqlite", () => sqliteStore())
