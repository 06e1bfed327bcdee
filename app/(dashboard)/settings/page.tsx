import { ApiTokens } from "@/components/settings/api-tokens";
import { ChatAccounts } from "@/components/settings/chat-accounts";
import { PersonalNotifications } from "@/components/settings/personal-notifications";

export const dynamic = "force-dynamic";

export default function SettingsPage() {
  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-2xl font-semibold tracking-tight">Settings</h1>
        <p className="text-muted-foreground text-sm">Your API tokens and where you are notified. Project members are managed by each project's owners.</p>
      </div>
      <ApiTokens />
      <PersonalNotifications />
      <ChatAccounts />
    </div>
  );
}
