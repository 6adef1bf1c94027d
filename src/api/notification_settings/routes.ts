import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { requireUser } from '../../plugins/auth.js';
import { presentGlobalNotificationSetting, presentNotificationSetting } from '../../presenters/notification_settings.js';
import { GlobalNotificationSettingSchema, NotificationSettingSchema } from '../../presenters/schemas/notification_settings.js';
import {
  GLOBAL_SOURCE,
  getNotificationSetting,
  NOTIFICATION_EVENTS,
  notificationEmailOf,
  updateNotificationSetting,
  type NotificationEvent,
  type NotificationSource,
} from '../../services/notification_settings.js';
import { IdParams } from '../params.js';
import { groupOf, projectOf, route } from '../route.js';

/**
 * Notification settings (GitLab's API::NotificationSettings): the caller's global setting, and
 * their setting for a group or project they can read (404 otherwise). Signed-in callers only.
 */

const EventFlags = Object.fromEntries(NOTIFICATION_EVENTS.map((e) => [e, Type.Optional(Type.Boolean())]));
const SourceBody = Type.Object({ level: Type.Optional(Type.String()), ...EventFlags });
const GlobalBody = Type.Object({ level: Type.Optional(Type.String()), notification_email: Type.Optional(Type.String()), ...EventFlags });

function flagsOf(body: Record<string, unknown>): Partial<Record<NotificationEvent, boolean>> {
  const out: Partial<Record<NotificationEvent, boolean>> = {};
  for (const e of NOTIFICATION_EVENTS) if (typeof body[e] === 'boolean') out[e] = body[e] as boolean;
  return out;
}

export default async function notificationSettingRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;

  app.get('/api/v4/notification_settings', route({ matrix: 'signedIn',
    access: { signedIn: true },
    schema: { response: { 200: GlobalNotificationSettingSchema } },
  }), async (request) => {
    const user = requireUser(request);
    const setting = await getNotificationSetting(db(), user.id, GLOBAL_SOURCE);
    return presentGlobalNotificationSetting(setting, await notificationEmailOf(db(), user, setting.notification_email));
  });

  app.put('/api/v4/notification_settings', route({ matrix: 'signedIn',
    access: { signedIn: true },
    schema: { body: GlobalBody, response: { 200: GlobalNotificationSettingSchema } },
  }), async (request) => {
    const user = requireUser(request);
    const body = request.body as Record<string, unknown>;
    const setting = await updateNotificationSetting(db(), user, GLOBAL_SOURCE, {
      level: body.level as string | undefined,
      notification_email: body.notification_email as string | undefined,
      events: flagsOf(body),
    });
    return presentGlobalNotificationSetting(setting, await notificationEmailOf(db(), user, setting.notification_email));
  });

  const sources: { kind: 'groups' | 'projects'; access: any; source: (request: any) => NotificationSource }[] = [
    { kind: 'groups', access: { group: 'read_group', signedIn: true }, source: (r) => ({ type: 'Namespace', id: groupOf(r).group.id }) },
    { kind: 'projects', access: { project: 'read_project', signedIn: true }, source: (r) => ({ type: 'Project', id: projectOf(r).project.id }) },
  ];
  for (const { kind, access, source } of sources) {
    app.get(`/api/v4/${kind}/:id/notification_settings`, route({ matrix: 'read',
      access,
      schema: { params: IdParams, response: { 200: NotificationSettingSchema } },
    }), async (request) => {
      const user = requireUser(request);
      return presentNotificationSetting(await getNotificationSetting(db(), user.id, source(request)));
    });

    app.put(`/api/v4/${kind}/:id/notification_settings`, route({ matrix: 'read',
      access,
      schema: { params: IdParams, body: SourceBody, response: { 200: NotificationSettingSchema } },
    }), async (request) => {
      const user = requireUser(request);
      const body = request.body as Record<string, unknown>;
      const setting = await updateNotificationSetting(db(), user, source(request), { level: body.level as string | undefined, events: flagsOf(body) });
      return presentNotificationSetting(setting);
    });
  }
}
